;; open opens f.txt in the first preopened directory (fd 3) and returns its descriptor (or -errno).
(module
  (import "wasi_snapshot_preview1" "path_open"
    (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "f.txt")
  (func (export "open") (result i32)
    (local $errno i32)
    (local.set $errno (call $path_open (i32.const 3) (i32.const 0) (i32.const 16) (i32.const 5)
      (i32.const 0) (i64.const 2) (i64.const 0) (i32.const 0) (i32.const 64)))
    (if (result i32) (local.get $errno)
      (then (i32.sub (i32.const 0) (local.get $errno)))
      (else (i32.load (i32.const 64))))))
