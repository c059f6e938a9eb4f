;; An endless loop whose body is one memory.fill over 16 MiB: a bulk instruction does work in
;; proportion to its length operand, with no loop of its own.
(module
  (memory (export "memory") 256)
  (func (export "gate") (result i32)
    (loop $spin
      (memory.fill (i32.const 0) (i32.const 7) (i32.const 16777216))
      (br $spin))
    (i32.const 10)))
