#!/usr/bin/env node
// ONNX Runtime peer for nnc's benchmarks: times one model the way `nnc bench --json` does
// and prints one JSON line.
//
//   node ort_bench.js MODEL.onnx [--threads N] [--iterations K] [--warmup W]
//                     [--input [NAME=]FILE ...] [--inputs-dir DIR] [--spin 0|1]
//                     [--output-dir DIR]
//
// Session options: graphOptimizationLevel 'all', intraOpNumThreads N, interOpNumThreads 1,
// executionMode 'sequential'. Inputs come from ONNX TensorProto files (input_<i>.pb in
// --inputs-dir) or from --input, repeatable, as `nnc bench --input` takes them: NAME=FILE or,
// for a single-input model, FILE; a .pb (TensorProto) or .npy (float32, C order) file. Without
// them, random data of the model's static input shapes is used. --spin sets the session config entry
// session.intra_op.allow_spinning (ORT's default is 1: idle pool threads spin, which costs
// on a loaded machine); without it the entry is left at ORT's default. --output-dir writes
// each output of one untimed run as DIR/output_<k>.npy (numeric types), for an accuracy check
// of ORT itself against the same reference as nnc's.
'use strict';

const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

function usage(msg) {
  if (msg) process.stderr.write(`ort_bench: ${msg}\n`);
  process.stderr.write(
      'usage: node ort_bench.js MODEL.onnx [--threads N] [--iterations K] [--warmup W]\n' +
      '                         [--input [NAME=]FILE ...] [--inputs-dir DIR] [--spin 0|1]\n' +
      '                         [--output-dir DIR]\n');
  process.exit(2);
}

function parseArgs(argv) {
  const a = {model: null, threads: 1, iterations: 20, warmup: 3, inputs: [], inputsDir: null,
             spin: null, outputDir: null};
  for (let i = 0; i < argv.length; ++i) {
    const k = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) usage(`${k} needs a value`);
      return argv[++i];
    };
    const int = (v) => {
      if (!/^\d+$/.test(v)) usage(`${k} expects a non-negative integer, got '${v}'`);
      return parseInt(v, 10);
    };
    if (k === '--threads') a.threads = int(next());
    else if (k === '--iterations') a.iterations = int(next());
    else if (k === '--warmup') a.warmup = int(next());
    else if (k === '--input') a.inputs.push(next());
    else if (k === '--inputs-dir') a.inputsDir = next();
    else if (k === '--output-dir') a.outputDir = next();
    else if (k === '--spin') {
      a.spin = next();
      if (a.spin !== '0' && a.spin !== '1') usage(`--spin expects 0 or 1, got '${a.spin}'`);
    }
    else if (k === '-h' || k === '--help') usage();
    else if (k.startsWith('-')) usage(`unknown option ${k}`);
    else if (a.model === null) a.model = k;
    else usage(`unexpected argument ${k}`);
  }
  if (a.model === null) usage('missing MODEL');
  if (a.iterations < 1) usage('--iterations must be at least 1');
  return a;
}

// ---- Minimal protobuf reader for onnx.TensorProto -------------------------------------------
// Fields used: 1 dims (int64, packed or not), 2 data_type (int32), 4 float_data (packed float),
// 8 name (string), 9 raw_data (bytes). Everything else is skipped by wire type.

function readVarint(buf, pos) {
  let result = 0n;
  let shift = 0n;
  for (;;) {
    if (pos >= buf.length) throw new Error('truncated varint');
    const b = buf[pos++];
    result |= BigInt(b & 0x7f) << shift;
    if ((b & 0x80) === 0) break;
    shift += 7n;
    if (shift > 63n) throw new Error('varint too long');
  }
  return [result, pos];
}

function parseTensorProto(buf) {
  const t = {dims: [], dataType: 0, name: '', raw: null, floatData: []};
  let pos = 0;
  while (pos < buf.length) {
    let key;
    [key, pos] = readVarint(buf, pos);
    const field = Number(key >> 3n);
    const wire = Number(key & 7n);
    if (wire === 0) {
      let v;
      [v, pos] = readVarint(buf, pos);
      if (field === 1) t.dims.push(Number(BigInt.asIntN(64, v)));
      else if (field === 2) t.dataType = Number(v);
    } else if (wire === 2) {
      let len;
      [len, pos] = readVarint(buf, pos);
      const end = pos + Number(len);
      if (end > buf.length) throw new Error('truncated length-delimited field');
      const body = buf.subarray(pos, end);
      if (field === 1) {  // packed dims
        let p = 0;
        while (p < body.length) {
          let v;
          [v, p] = readVarint(body, p);
          t.dims.push(Number(BigInt.asIntN(64, v)));
        }
      } else if (field === 4) {  // packed float_data
        for (let p = 0; p + 4 <= body.length; p += 4) t.floatData.push(body.readFloatLE(p));
      } else if (field === 8) {
        t.name = body.toString('utf8');
      } else if (field === 9) {
        t.raw = body;
      }
      pos = end;
    } else if (wire === 5) {
      if (field === 4) t.floatData.push(buf.readFloatLE(pos));
      pos += 4;
    } else if (wire === 1) {
      pos += 8;
    } else {
      throw new Error(`unsupported protobuf wire type ${wire}`);
    }
  }
  return t;
}

function tensorFromPb(file) {
  const t = parseTensorProto(fs.readFileSync(file));
  if (t.dataType !== 1) {
    throw new Error(`${file}: data_type ${t.dataType} not supported (only 1 = FLOAT)`);
  }
  const count = t.dims.reduce((a, b) => a * b, 1);
  let data;
  if (t.raw !== null) {
    if (t.raw.length !== count * 4) {
      throw new Error(`${file}: raw_data has ${t.raw.length} bytes, dims ${JSON.stringify(t.dims)} need ${count * 4}`);
    }
    data = new Float32Array(count);
    // Copy: raw_data may not be 4-byte aligned inside the file buffer.
    Buffer.from(data.buffer).set(t.raw);
  } else {
    if (t.floatData.length !== count) {
      throw new Error(`${file}: float_data has ${t.floatData.length} values, dims need ${count}`);
    }
    data = Float32Array.from(t.floatData);
  }
  return {name: t.name, tensor: new ort.Tensor('float32', data, t.dims)};
}

// A .npy file (format 1-3) of little-endian float32 or int64 (token ids) in C order:
// {name: '', tensor}.
function tensorFromNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || buf.toString('latin1', 0, 6) !== '\x93NUMPY') {
    throw new Error(`${file}: not a .npy file`);
  }
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + headerLen;
  const header = buf.toString('latin1', major === 1 ? 10 : 12, start);
  const descr = /'descr':\s*'([^']*)'/.exec(header);
  const fortran = /'fortran_order':\s*(True|False)/.exec(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shape) throw new Error(`${file}: unreadable .npy header ${header}`);
  const kinds = {'<f4': ['float32', Float32Array, 4], '<i8': ['int64', BigInt64Array, 8]};
  const kind = kinds[descr[1]];
  if (!kind) throw new Error(`${file}: dtype ${descr[1]} not supported (only <f4, <i8)`);
  const [type, Typed, size] = kind;
  if (fortran[1] !== 'False') throw new Error(`${file}: Fortran order not supported`);
  const dims = shape[1].split(',').map((d) => d.trim()).filter((d) => d !== '').map(Number);
  const count = dims.reduce((x, y) => x * y, 1);
  if (buf.length - start !== count * size) {
    throw new Error(`${file}: ${buf.length - start} data bytes, shape [${dims}] needs ${count * size}`);
  }
  const data = new Typed(count);
  Buffer.from(data.buffer).set(buf.subarray(start));  // copied: the data may be unaligned
  return {name: '', tensor: new ort.Tensor(type, data, dims)};
}

function tensorFromFile(file) {
  return file.endsWith('.npy') ? tensorFromNpy(file) : tensorFromPb(file);
}

function randomTensor(meta, name) {
  if (meta.type !== undefined && meta.type !== 'float32') {
    throw new Error(`input '${name}': type ${meta.type} has no random generator (pass --inputs-dir)`);
  }
  const shape = meta.shape || [];
  for (const d of shape) {
    if (typeof d !== 'number') {
      throw new Error(`input '${name}': symbolic dim '${d}' (pass --inputs-dir)`);
    }
  }
  const count = shape.reduce((a, b) => a * b, 1);
  const data = new Float32Array(count);
  let s = 12345;  // fixed LCG seed, values in [-1, 1)
  for (let i = 0; i < count; ++i) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    data[i] = (s / 2147483648) - 1;
  }
  return new ort.Tensor('float32', data, shape);
}

// An ORT output tensor as a .npy file (format version 1.0, C order, little-endian).
function writeNpy(file, tensor) {
  const descr = {
    float32: '<f4', float64: '<f8', int64: '<i8', int32: '<i4', int16: '<i2', int8: '|i1',
    uint64: '<u8', uint32: '<u4', uint16: '<u2', uint8: '|u1', bool: '|b1',
  }[tensor.type];
  if (descr === undefined) throw new Error(`--output-dir: output of type ${tensor.type}`);
  const dims = tensor.dims.map(Number);
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  // Magic (6), version (2), header length (2), then the header padded to 64 bytes with '\n'.
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1;
  pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const data = tensor.data;
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
}

function percentile(sorted, q) {
  // Nearest-rank on the sorted sample.
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[idx];
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const opts = {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    intraOpNumThreads: a.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  };
  if (a.spin !== null) opts.extra = {session: {intra_op: {allow_spinning: a.spin}}};
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(a.model, opts);
  const createMs = Number(process.hrtime.bigint() - t0) / 1e6;

  const feeds = {};
  const names = session.inputNames;
  if (a.inputs.length > 0) {
    a.inputs.forEach((spec, i) => {
      const m = /^([^=/]+)=(.+)$/.exec(spec);
      const file = m ? m[2] : spec;
      const {name, tensor} = tensorFromFile(file);
      const want = m ? m[1] : (name && names.includes(name) ? name : names[i]);
      if (!names.includes(want)) {
        throw new Error(`--input ${spec}: the model has no input '${want}' (inputs: ${names.join(', ')})`);
      }
      feeds[want] = tensor;
    });
    if (Object.keys(feeds).length !== names.length) {
      throw new Error(`model has ${names.length} inputs, --input gave ${Object.keys(feeds).length}`);
    }
  } else if (a.inputsDir !== null) {
    const files = names.map((_, i) => path.join(a.inputsDir, `input_${i}.pb`));
    files.forEach((f, i) => {
      const {name, tensor} = tensorFromPb(f);
      // Match by name when the file names an input, else by position.
      feeds[name && names.includes(name) ? name : names[i]] = tensor;
    });
  } else {
    const meta = session.inputMetadata || [];
    names.forEach((n, i) => {
      feeds[n] = randomTensor(meta[i] || {}, n);
    });
  }

  // With an inputs dir holding output_0.pb, report how far ORT's first output is from it
  // (a check that the inputs were read right, not a timing).
  let maxAbsErr = null;
  if (a.inputsDir !== null && fs.existsSync(path.join(a.inputsDir, 'output_0.pb'))) {
    const ref = tensorFromPb(path.join(a.inputsDir, 'output_0.pb')).tensor.data;
    const got = (await session.run(feeds))[session.outputNames[0]].data;
    if (got.length !== ref.length) {
      throw new Error(`output has ${got.length} values, output_0.pb has ${ref.length}`);
    }
    maxAbsErr = 0;
    for (let i = 0; i < ref.length; ++i) maxAbsErr = Math.max(maxAbsErr, Math.abs(got[i] - ref[i]));
  }

  if (a.outputDir !== null) {
    const outs = await session.run(feeds);
    fs.mkdirSync(a.outputDir, {recursive: true});
    session.outputNames.forEach((n, k) => {
      writeNpy(path.join(a.outputDir, `output_${k}.npy`), outs[n]);
    });
  }

  for (let i = 0; i < a.warmup; ++i) await session.run(feeds);
  const times = [], cpuTimes = [];
  for (let i = 0; i < a.iterations; ++i) {
    const s = process.hrtime.bigint();
    const c = process.cpuUsage();
    await session.run(feeds);
    const cu = process.cpuUsage(c);
    times.push(Number(process.hrtime.bigint() - s) / 1e6);
    cpuTimes.push((cu.user + cu.system) / 1e3);
  }
  // The process's CPU time per run (all its threads, a spinning pool's too): at 1 thread, on a
  // host shared with other work, the run without the scheduler's waits.
  const cpuSorted = cpuTimes.slice().sort((x, y) => x - y);
  const cpuMedian = cpuSorted.length % 2
      ? cpuSorted[(cpuSorted.length - 1) / 2]
      : (cpuSorted[cpuSorted.length / 2 - 1] + cpuSorted[cpuSorted.length / 2]) / 2;
  const sorted = times.slice().sort((x, y) => x - y);
  const median = sorted.length % 2
      ? sorted[(sorted.length - 1) / 2]
      : (sorted[sorted.length / 2 - 1] + sorted[sorted.length / 2]) / 2;
  const mean = times.reduce((x, y) => x + y, 0) / times.length;
  const r4 = (x) => Math.round(x * 1e4) / 1e4;
  const out = {
    model: a.model,
    peer: 'ort',
    runner: 'onnxruntime-node',
    version: ort.env.versions.common,
    threads: a.threads,
    allow_spinning: a.spin === null ? 'default' : a.spin,
    iterations: a.iterations,
    warmup: a.warmup,
    compile_ms: Math.round(createMs * 1e3) / 1e3,
    median_ms: r4(median),
    p90_ms: r4(percentile(sorted, 0.9)),
    min_ms: r4(sorted[0]),
    mean_ms: r4(mean),
    median_cpu_ms: r4(cpuMedian),
  };
  if (maxAbsErr !== null) out.max_abs_err_vs_output_0 = maxAbsErr;
  process.stdout.write(JSON.stringify(out) + '\n');
  await session.release();
}

main().catch((e) => {
  process.stderr.write(`ort_bench: ${e && e.message ? e.message : e}\n`);
  process.exit(1);
});
