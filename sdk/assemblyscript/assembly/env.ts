// The imports of a Pixie guest: Extism's kernel (extism:host/env) and Pixie's host functions
// (extism:host/user), as docs/abi.md lists them, and the one WASI function the SDK uses
// (fd_write, so that an abort's message reaches the run's stderr). Every memory argument and
// result is an offset into Extism's kernel memory, not into the guest's own linear memory.

// @ts-ignore: decorator
@external("extism:host/env", "alloc")
export declare function alloc(length: u64): u64;
// @ts-ignore: decorator
@external("extism:host/env", "free")
export declare function free(offset: u64): void;
// @ts-ignore: decorator
@external("extism:host/env", "length")
export declare function length(offset: u64): u64;
// @ts-ignore: decorator
@external("extism:host/env", "load_u8")
export declare function load_u8(offset: u64): u32;
// @ts-ignore: decorator
@external("extism:host/env", "load_u64")
export declare function load_u64(offset: u64): u64;
// @ts-ignore: decorator
@external("extism:host/env", "store_u8")
export declare function store_u8(offset: u64, value: u32): void;
// @ts-ignore: decorator
@external("extism:host/env", "store_u64")
export declare function store_u64(offset: u64, value: u64): void;
// @ts-ignore: decorator
@external("extism:host/env", "output_set")
export declare function output_set(offset: u64, length: u64): void;
// @ts-ignore: decorator
@external("extism:host/env", "error_set")
export declare function error_set(offset: u64): void;
// @ts-ignore: decorator
@external("extism:host/env", "config_get")
export declare function config_get(offset: u64): u64;

// @ts-ignore: decorator
@external("extism:host/user", "pixie_context")
export declare function pixie_context(): u64;
// @ts-ignore: decorator
@external("extism:host/user", "pixie_ask")
export declare function pixie_ask(request: u64): u64;
// @ts-ignore: decorator
@external("extism:host/user", "pixie_judge")
export declare function pixie_judge(request: u64): u64;
// @ts-ignore: decorator
@external("extism:host/user", "pixie_log")
export declare function pixie_log(request: u64): void;
// @ts-ignore: decorator
@external("extism:host/user", "pet_context")
export declare function pet_context(): u64;

// @ts-ignore: decorator
@external("wasi_snapshot_preview1", "fd_write")
export declare function fd_write(fd: u32, iovs: usize, iovsLen: usize, written: usize): u16;
