;; Mutual recursion without a loop: $f and $g call each other twice, 60 deep (2^60 calls).
(module
  (memory (export "memory") 1)
  (func $f (param $n i32)
    (if (i32.eqz (local.get $n)) (then (return)))
    (call $g (i32.sub (local.get $n) (i32.const 1)))
    (call $g (i32.sub (local.get $n) (i32.const 1))))
  (func $g (param $n i32)
    (if (i32.eqz (local.get $n)) (then (return)))
    (call $f (i32.sub (local.get $n) (i32.const 1)))
    (call $f (i32.sub (local.get $n) (i32.const 1))))
  (func (export "gate") (result i32)
    (call $f (i32.const 60))
    (i32.const 10)))
