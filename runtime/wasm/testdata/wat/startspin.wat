;; A start function that never returns: it runs while the module is instantiated.
(module
  (memory (export "memory") 1)
  (func $start (loop $spin (br $spin)))
  (start $start)
  (func (export "gate") (result i32) (i32.const 10)))
