;; Copied from shared/repro/wasm/treerec.wat (the reproducer of issue 15): the storm's recursion guest.
;; Exponential tree recursion with no loop (depth 60, 2^60 calls): never ends,
;; never reaches a loop header, never calls into Go.
(module
  (memory (export "memory") 1)
  (func $f (param $n i32)
    (if (i32.eqz (local.get $n)) (then (return)))
    (call $f (i32.sub (local.get $n) (i32.const 1)))
    (call $f (i32.sub (local.get $n) (i32.const 1))))
  (func (export "gate") (result i32)
    (call $f (i32.const 60))
    (i32.const 10)))
