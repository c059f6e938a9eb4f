;; Tree recursion through call_indirect (the table holds the function itself), no loop.
(module
  (memory (export "memory") 1)
  (type $t (func (param i32)))
  (table 1 funcref)
  (elem (i32.const 0) $f)
  (func $f (type $t) (param $n i32)
    (if (i32.eqz (local.get $n)) (then (return)))
    (call_indirect (type $t) (i32.sub (local.get $n) (i32.const 1)) (i32.const 0))
    (call_indirect (type $t) (i32.sub (local.get $n) (i32.const 1)) (i32.const 0)))
  (func (export "gate") (result i32)
    (call $f (i32.const 60))
    (i32.const 10)))
