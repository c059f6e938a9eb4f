// The package's entry for the AssemblyScript compiler, which resolves `import … from
// "@pixie-dev/sdk"` to this file: the SDK is in assembly/.
export * from "./assembly/index";
