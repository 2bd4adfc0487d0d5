/**
 * `npm run bench:ab`: one benchmark script of this checkout against the same script of another
 * checkout (an older build), each run in its own process, alternating A B, B A, A B … within one
 * run, and the ratio this / other taken round by round, so a machine that speeds up or slows
 * down in the middle hits both alike. The script must print its figures as JSON: a line that is
 * one JSON value, or a line `BENCH_JSON <json>` (as `bench/index.ts` prints); every number in it
 * is compared, at its path (`plain.7`, `workloads.agentdock.p50Micros`), and what is not a number
 * on one side (`refused`) is shown as it is.
 *
 *   npx tsx bench/ab.ts --other=<checkout> [--rounds=5] [--match=<substring>] [--each=a,b] -- <script> [args]
 *   npx tsx bench/ab.ts --other=../old -- bench/running-calls.ts --json --running=0,1,7
 *   npx tsx bench/ab.ts --other=../old --each=turns,growth -- bench/index.ts --only={} --quick
 *
 * `--node` runs the script with node alone (no tsx): for checkouts compiled with tsc, e.g.
 * `npx tsc -p tsconfig.json --noEmit false --outDir <dir>` (plus a node_modules symlink and the
 * package.json in <dir>), whose code is then the built package's, not tsx's (see
 * bench/running-calls.ts on tsx's `__name`): `bench/ab.ts --node --other=<old dir> -- <new
 * dir>/bench/ai-sdk.js …` runs `bench/ai-sdk.js` of each dir.
 *
 * `--each=a,b,…` runs the command once per value in every round, with `{}` in its arguments
 * replaced by the value (and the value heading its figures' paths): `npm run bench`'s sections,
 * each in its own pair of processes, all within one alternating run.
 *
 * The other checkout needs the script at the same path (copy it there when it is new) and its
 * own node_modules (a symlink is enough); each process runs `node --import tsx <script>` with
 * its checkout as the working directory. `--match` keeps the paths containing the substring.
 * Prints a table (median of this, median of other, median ratio, lowest and highest ratio of a
 * round) and `AB_JSON <json>`. A ratio above 1 is a figure larger here: slower for a time,
 * faster for a rate.
 */
import { spawn } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { resolve } from 'node:path';

const argv = process.argv.slice(2);
const split = argv.indexOf('--');
const own = split < 0 ? argv : argv.slice(0, split);
const command = split < 0 ? [] : argv.slice(split + 1);
const flag = (name: string) => own.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const other = flag('other');
const rounds = Number(flag('rounds') ?? 5);
const match = flag('match');
const each = flag('each')?.split(',') ?? [undefined];
const NODE_ONLY = own.includes('--node');
if (other === undefined || command.length === 0) {
  throw new Error(
    'usage: bench/ab.ts --other=<checkout> [--rounds=5] [--match=<substring>] [--each=a,b] -- <script> [args]',
  );
}
const ROOTS = { this: resolve(flag('this') ?? resolve(import.meta.dirname, '..')), other: resolve(other) } as const;
type Side = keyof typeof ROOTS;

/** Runs the script in `root` (with `{}` replaced by `value`), and returns the JSON it printed. */
function runIn(root: string, value: string | undefined): Promise<unknown> {
  const [script, ...rest] = command.map((arg) => (value === undefined ? arg : arg.replaceAll('{}', value)));
  return new Promise((done, fail) => {
    const loader = NODE_ONLY ? [] : ['--import', 'tsx'];
    const child = spawn(process.execPath, [...loader, resolve(root, script!), ...rest], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.on('error', fail);
    child.on('close', (code) => {
      const lines = out.split('\n').map((l) => l.trim());
      const tagged = lines.findLast((l) => l.startsWith('BENCH_JSON '));
      const bare = lines.findLast((l) => l.startsWith('{') || l.startsWith('['));
      const text = tagged?.slice('BENCH_JSON '.length) ?? bare;
      if (code !== 0 || text === undefined) {
        fail(new Error(`${script} in ${root} exited ${code}: ${out.slice(-800)}`));
        return;
      }
      done(JSON.parse(text));
    });
  });
}

/**
 * A name for an array element that is the same in both checkouts and every round: its labels
 * (`agent`, `store`, …, the `sessions` it ran), else its `value` (a growth cell's size), else its
 * index. Not `impl`, which names the checkout.
 */
function nameOf(value: unknown, index: number): string {
  if (typeof value !== 'object' || value === null) return String(index);
  const record = value as Record<string, unknown>;
  const labels = ['agent', 'dimension', 'store', 'workload', 'label', 'name', 'upstream', 'target']
    .map((key) => record[key])
    .filter((v) => typeof v === 'string');
  if (typeof record.sessions === 'number') labels.push(String(record.sessions));
  if (labels.length > 0) return labels.join('/');
  return typeof record.value === 'number' ? String(record.value) : String(index);
}

/** Every leaf of `value` that is not an object, by path. */
function leaves(value: unknown, path: string, out: Map<string, unknown>): Map<string, unknown> {
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) leaves(v, `${path}.${nameOf(v, i)}`, out);
  } else if (typeof value === 'object' && value !== null) {
    for (const [key, v] of Object.entries(value)) leaves(v, path === '' ? key : `${path}.${key}`, out);
  } else out.set(path, value);
  return out;
}

const median = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

console.log(
  `A/B: ${command.join(' ')}\n  this:  ${ROOTS.this}\n  other: ${ROOTS.other}\n` +
    `  ${rounds} rounds, alternating; ${cpus().length} × ${cpus()[0]?.model ?? '?'}, load ${loadavg()[0]!.toFixed(2)}, Node ${process.version}`,
);
const taken: Record<Side, Map<string, unknown>[]> = { this: [], other: [] };
for (let round = 0; round < rounds; round++) {
  const order: Side[] = round % 2 === 0 ? ['this', 'other'] : ['other', 'this'];
  const figures: Record<Side, Map<string, unknown>> = { this: new Map(), other: new Map() };
  for (const value of each) {
    for (const side of order) leaves(await runIn(ROOTS[side], value), value ?? '', figures[side]);
  }
  for (const side of order) taken[side].push(figures[side]);
  console.log(`  round ${round + 1}/${rounds} done (${order.join(' then ')}), load ${loadavg()[0]!.toFixed(2)}`);
}

interface Row {
  path: string;
  this: number | string;
  other: number | string;
  ratio?: number;
  low?: number;
  high?: number;
}
const rows: Row[] = [];
const paths = new Set([...taken.this.flatMap((m) => [...m.keys()]), ...taken.other.flatMap((m) => [...m.keys()])]);
for (const path of paths) {
  if (match !== undefined && !path.includes(match)) continue;
  const mine = taken.this.map((m) => m.get(path));
  const theirs = taken.other.map((m) => m.get(path));
  const numeric = (vs: unknown[]) => vs.every((v) => typeof v === 'number');
  if (numeric(mine) && numeric(theirs)) {
    // A figure that is the same everywhere (a setting, a count of round trips) says nothing.
    if (new Set([...mine, ...theirs]).size === 1) continue;
    const ratios = mine.map((v, i) => (v as number) / (theirs[i] as number));
    rows.push({
      path,
      this: median(mine as number[]),
      other: median(theirs as number[]),
      ratio: median(ratios),
      low: Math.min(...ratios),
      high: Math.max(...ratios),
    });
  } else {
    const show = (vs: unknown[]) => (numeric(vs) ? median(vs as number[]) : [...new Set(vs.map(String))].join('|'));
    // Labels, versions and load averages say nothing; a figure one side could not measure does.
    if (!numeric(mine) && !numeric(theirs)) continue;
    rows.push({ path, this: show(mine), other: show(theirs) });
  }
}
const cell = (v: number | string | undefined, digits = 3) =>
  v === undefined
    ? ''
    : typeof v === 'number'
      ? Number(v.toPrecision(4))
          .toFixed(digits)
          .replace(/\.?0+$/, '')
      : v;
console.log('\n| figure | this | other | this / other (median) | lowest – highest round |');
console.log('|---|---:|---:|---:|---:|');
for (const r of rows) {
  console.log(
    `| ${r.path} | ${cell(r.this)} | ${cell(r.other)} | ${r.ratio === undefined ? '' : `${r.ratio.toFixed(2)}x`} | ${
      r.low === undefined ? '' : `${r.low.toFixed(2)}–${r.high!.toFixed(2)}`
    } |`,
  );
}
console.log(`AB_JSON ${JSON.stringify(rows)}`);
