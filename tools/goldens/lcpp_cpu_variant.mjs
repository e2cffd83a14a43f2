#!/usr/bin/env node
// Runs the llama.cpp oracle with one CPU variant of ggml forced, e.g. the AVX2 one on an AVX-512
// machine:
//     node tools/goldens/lcpp_cpu_variant.mjs haswell logits MODEL --ids 1,2,3 --precise --no-repack
// (any `oracle.mjs` command line after the variant name). tools/goldens/forward_goldens.py
// --cpu-variant NAME runs every oracle call through it.
//
// The prebuilt llama.cpp ships its CPU backend as variants libggml-cpu-NAME.so (x64, sse42, haswell,
// skylakex, icelake, zen4, sapphirerapids, ...); ggml loads every one in the folder it is given and
// keeps the best for this CPU. The oracle's native engine gets that folder as `--bins DIR`. Here the
// oracle's own oracle.mjs runs unchanged, except that `--bins` names a temporary folder holding a
// link to libggml-cpu-NAME.so alone, so ggml can only load that variant (the CPU must support it).
// `oracle.mjs version` then reports that variant's features in `native.system_info`.
//
// The oracle: $LLMINFER_LCPP_ORACLE, else ../shared/tools/llamacpp-oracle beside the repository.
import cp from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {syncBuiltinESMExports} from "node:module";
import {fileURLToPath, pathToFileURL} from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const oracleDir = process.env.LLMINFER_LCPP_ORACLE || path.join(here, "..", "..", "..", "shared", "tools", "llamacpp-oracle");
const variant = process.argv[2];
if (!variant || !/^[a-z0-9_]+$/.test(variant)) {
    console.log(JSON.stringify({error: "usage: lcpp_cpu_variant.mjs VARIANT ORACLE-COMMAND [OPTIONS] (VARIANT e.g. haswell)"}));
    process.exit(2);
}
const bins = path.join(oracleDir, "node_modules", "@node-llama-cpp", "linux-x64", "bins", "linux-x64");
const lib = path.join(bins, `libggml-cpu-${variant}.so`);
if (!fs.existsSync(lib)) {
    console.log(JSON.stringify({error: `no ${lib}`}));
    process.exit(1);
}
const only = fs.mkdtempSync(path.join(os.tmpdir(), `lcpp-cpu-${variant}-`));
fs.symlinkSync(lib, path.join(only, path.basename(lib)));
process.on("exit", () => fs.rmSync(only, {recursive: true, force: true}));

// oracle.mjs starts its native engine with child_process.spawnSync(BIN, [CMD, "--bins", DIR, ...]):
// replace DIR (the ESM binding of the built-in module follows after syncBuiltinESMExports)
const spawnSync = cp.spawnSync;
cp.spawnSync = function (bin, args, opts) {
    const i = Array.isArray(args) ? args.indexOf("--bins") : -1;
    if (i >= 0) args = [...args.slice(0, i + 1), only, ...args.slice(i + 2)];
    return spawnSync.call(this, bin, args, opts);
};
syncBuiltinESMExports();
process.argv.splice(2, 1);  // oracle.mjs reads its command line from process.argv.slice(2)
await import(pathToFileURL(path.join(oracleDir, "oracle.mjs")).href);
