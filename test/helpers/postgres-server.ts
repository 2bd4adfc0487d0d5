/**
 * PostgreSQL servers that a test creates (initdb in a temporary directory), stops and restarts
 * itself (outages on purpose), never the machine's shared server. As root, the server binaries
 * run as the `postgres` user (initdb and postgres refuse root).
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { chown, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './free-port.js';

const exec = promisify(execFile);

/** The newest PostgreSQL server binaries under /usr/lib/postgresql, or undefined when there are none. */
export function findPostgresBinaries(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : join(root, versions[0], 'bin');
}

/** Runs a server binary as the `postgres` OS user when we are root. */
async function asPostgres(command: string, args: string[]): Promise<string> {
  const asRoot = process.getuid?.() === 0;
  const [file, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];
  const { stdout } = await exec(file, argv, { timeout: 60_000 });
  return stdout;
}

/** A server's files and address. */
export interface PostgresServer {
  /** The binaries it runs with. */
  bin: string;
  dir: string;
  data: string;
  port: number;
  /** Connection string for the `postgres` database as the `postgres` user (trust auth). */
  url: string;
}

/** Creates a server's data directory (initdb, trust auth) on a free port; it is not started. */
export async function createPostgresServer(bin: string): Promise<PostgresServer> {
  const dir = await mkdtemp(join(tmpdir(), 'baton-pg-faults-'));
  if (process.getuid?.() === 0) {
    const uid = Number((await exec('id', ['-u', 'postgres'])).stdout.trim());
    const gid = Number((await exec('id', ['-g', 'postgres'])).stdout.trim());
    await chown(dir, uid, gid);
  }
  const data = join(dir, 'data');
  await asPostgres(join(bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  const port = await freePort();
  return { bin, dir, data, port, url: `postgres://postgres@127.0.0.1:${port}/postgres` };
}

/** Starts the server and resolves once it accepts connections. */
export async function startPostgres(server: PostgresServer): Promise<void> {
  const options = `-p ${server.port} -k ${server.dir} -c listen_addresses=127.0.0.1 -c max_connections=40`;
  await asPostgres(join(server.bin, 'pg_ctl'), [
    '-D',
    server.data,
    '-l',
    join(server.dir, 'server.log'),
    '-o',
    options,
    '-w',
    '-t',
    '30',
    'start',
  ]);
}

/** Stops the server without a shutdown checkpoint (`-m immediate`), as a crash would. */
export async function stopPostgresImmediately(server: PostgresServer): Promise<void> {
  await asPostgres(join(server.bin, 'pg_ctl'), ['-D', server.data, '-m', 'immediate', '-w', 'stop']);
}

/** The server's processes: the postmaster (first line of postmaster.pid) and its children. */
export async function postgresProcesses(server: PostgresServer): Promise<number[]> {
  const postmaster = Number((await readFile(join(server.data, 'postmaster.pid'), 'utf8')).split('\n')[0]);
  const { stdout } = await exec('ps', ['-o', 'pid=', '--ppid', String(postmaster)]);
  return [postmaster, ...stdout.split('\n').filter(Boolean).map(Number)];
}

/** Stops the server if it runs and removes its files. */
export async function removePostgresServer(server: PostgresServer): Promise<void> {
  await stopPostgresImmediately(server).catch(() => undefined);
  await rm(server.dir, { recursive: true, force: true });
}
