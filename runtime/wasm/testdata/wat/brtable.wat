;; A loop inside a br_table target: br_table jumps past the inner block, into an endless loop.
(module
  (memory (export "memory") 1)
  (func (export "gate") (result i32)
    (block $out
      (block $b
        (block $a
          (br_table $a $b (i32.const 1)))
        (br $out))
      (loop $spin (br $spin)))
    (i32.const 10)))
