#!/usr/bin/env node
// Builds the package from source: the Rust addon with napi-rs (`napi build`, which runs
// cargo and writes native/shoal.<platform>.node, the loader native/index.js and its
// generated types native/index.d.ts), then the TypeScript API (lib/*.ts) with tsc into
// dist/ (dist/index.js and the generated dist/index.d.ts). It runs as the package's
// `install` script, so `npm install <path to bindings/node>` and `npm ci` build it; it
// needs Rust (cargo) on PATH. CARGO_TARGET_DIR, if set, is where cargo builds.
'use strict';
const { execFileSync } = require('node:child_process');
const path = require('node:path');

const here = path.resolve(__dirname, '..');
const bin = (name) => path.join(here, 'node_modules', '.bin', name);
const run = (cmd, args) => execFileSync(cmd, args, { cwd: here, stdio: 'inherit' });

try {
  execFileSync('cargo', ['--version'], { stdio: 'ignore' });
} catch {
  console.error('shoal: building the addon needs Rust (cargo on PATH): https://rustup.rs');
  process.exit(1);
}
const napiArgs = ['build', '--platform', '--release', '--output-dir', 'native',
  '--js', 'index.js', '--dts', 'index.d.ts'];
if (process.env.CARGO_TARGET_DIR) napiArgs.push('--target-dir', process.env.CARGO_TARGET_DIR);
run(bin('napi'), napiArgs);
run(bin('tsc'), ['-p', 'tsconfig.json']);
