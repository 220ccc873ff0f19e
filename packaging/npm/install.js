#!/usr/bin/env node
// @vetto/cli's install script: fetch the prebuilt vetto for this platform
// from the release of this package's version, check its SHA-256 against
// the SHA256SUMS shipped inside the package (written by the release
// workflow), and only then put it in place of bin/vetto. Any failure
// leaves nothing installed and fails `npm install`.
//
// No dependencies: node's own http(s), crypto and fs.
//
// VETTO_NPM_DOWNLOAD_BASE replaces the release URL (a mirror, or a local
// directory as file:///dir for tests); the checksums are the package's
// own whatever the source.
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const http = require('http');
const https = require('https');
const path = require('path');
const { fileURLToPath } = require('url');

const pkg = require('./package.json');

// process.platform + process.arch -> the release asset's target triple.
// Linux binaries are static (musl): they run on any distribution.
const TARGETS = {
  'linux x64': 'x86_64-unknown-linux-musl',
  'linux arm64': 'aarch64-unknown-linux-musl',
  'darwin x64': 'x86_64-apple-darwin',
  'darwin arm64': 'aarch64-apple-darwin',
};
const MAX_BYTES = 256 * 1024 * 1024;
const MAX_REDIRECTS = 5;
const TIMEOUT_MS = 120 * 1000;

function fail(message) {
  process.stderr.write(`vetto: install failed: ${message}\n`);
  process.exit(1);
}

/** SHA256SUMS (`sha256sum` output) as a Map of file name -> hex digest. */
function readSums(file) {
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    fail(`this package has no ${path.basename(file)} (${e.code}): only packages built by the release workflow carry the checksums it installs against`);
  }
  const sums = new Map();
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const m = /^([0-9a-f]{64}) [ *](\S+)$/.exec(line);
    if (!m) fail(`${path.basename(file)} has a malformed line: ${JSON.stringify(line.slice(0, 200))}`);
    sums.set(m[2], m[1]);
  }
  return sums;
}

/** The bytes at `url` (https, http or file), following a few redirects. */
function fetchBytes(url, redirects) {
  const u = new URL(url);
  if (u.protocol === 'file:') {
    return Promise.resolve(fs.readFileSync(fileURLToPath(u)));
  }
  const client = u.protocol === 'https:' ? https : u.protocol === 'http:' ? http : null;
  if (!client) return Promise.reject(new Error(`unsupported URL scheme ${u.protocol}`));
  return new Promise((resolve, reject) => {
    const req = client.get(u, { timeout: TIMEOUT_MS }, (res) => {
      const status = res.statusCode || 0;
      if ([301, 302, 303, 307, 308].includes(status) && res.headers.location) {
        res.resume();
        if (redirects <= 0) return reject(new Error(`too many redirects at ${u.href}`));
        const next = new URL(res.headers.location, u);
        if (u.protocol === 'https:' && next.protocol !== 'https:') {
          return reject(new Error(`refusing a redirect from https to ${next.protocol}`));
        }
        return fetchBytes(next.href, redirects - 1).then(resolve, reject);
      }
      if (status !== 200) {
        res.resume();
        return reject(new Error(`HTTP ${status} for ${u.href}`));
      }
      const chunks = [];
      let size = 0;
      res.on('data', (chunk) => {
        size += chunk.length;
        if (size > MAX_BYTES) {
          req.destroy(new Error(`more than ${MAX_BYTES} bytes from ${u.href}`));
          return;
        }
        chunks.push(chunk);
      });
      res.on('end', () => resolve(Buffer.concat(chunks)));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${u.href} in ${TIMEOUT_MS / 1000}s`)));
    req.on('error', reject);
  });
}

async function main() {
  const key = `${process.platform} ${process.arch}`;
  const target = TARGETS[key];
  if (!target) {
    fail(`no prebuilt vetto for ${key} (there are: ${Object.keys(TARGETS).join(', ')}); build it with \`cargo install --locked --git ${pkg.homepage}\``);
  }
  const asset = `vetto-${target}`;
  const expected = readSums(path.join(__dirname, 'SHA256SUMS')).get(asset);
  if (!expected) fail(`SHA256SUMS lists no ${asset}`);

  const base = (process.env.VETTO_NPM_DOWNLOAD_BASE || `${pkg.homepage}/releases/download/v${pkg.version}`).replace(/\/+$/, '');
  const url = `${base}/${asset}`;
  let bytes;
  try {
    bytes = await fetchBytes(url, MAX_REDIRECTS);
  } catch (e) {
    fail(`cannot download ${url}: ${e.message}`);
  }
  const actual = crypto.createHash('sha256').update(bytes).digest('hex');
  if (actual !== expected) {
    fail(`checksum mismatch for ${asset} from ${url}: SHA256SUMS says ${expected}, the download is ${actual}; nothing was installed`);
  }

  // Write beside the destination and rename over it: bin/vetto is either
  // the stand-in or the checked binary, never half of one.
  const dest = path.join(__dirname, 'bin', 'vetto');
  const tmp = `${dest}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, bytes, { mode: 0o755, flag: 'wx' });
  fs.renameSync(tmp, dest);
  process.stderr.write(`vetto: installed ${asset} ${pkg.version} (sha256 ${actual})\n`);
}

main().catch((e) => fail(e.message));
