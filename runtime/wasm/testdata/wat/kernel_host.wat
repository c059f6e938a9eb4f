;; Like gate_kernel.wat, but the kernel is made to loop by a host function: pixie_context writes
;; its answer with Extism's memory helpers, which call the kernel's alloc with
;; context.Background(). Run it with variables of tens of kilobytes: the context block then does
;; not fit in the kernel's first page, and alloc walks its blocks.
(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u64" (func $store_u64 (param i64 i64)))
  (import "extism:host/user" "pixie_context" (func $pixie_context (result i64)))
  (memory (export "memory") 1)
  (func (export "gate") (result i32)
    (local $p i64)
    (local.set $p (call $alloc (i64.const 40000)))
    (call $store_u64 (i64.sub (local.get $p) (i64.const 8)) (i64.const 0xFFFFFFF4))
    (drop (call $pixie_context))
    (i32.const 0)))
