/**
 * Listening on a port, for every command that serves HTTP (`baton serve`, `baton mcp --http`):
 * a port in use or an interface that does not exist is a setup error that says which flag to
 * change, printed as one line, never an unhandled `error` event with a stack.
 */
import type { AddressInfo, Server } from 'node:net';
import { BatonError } from '../core/errors.js';

/** A failure to start that the user can fix: printed without a stack, exit code 1. */
export class ServeSetupError extends BatonError {
  constructor(message: string) {
    super('serve-setup', message);
    this.name = 'ServeSetupError';
  }
}

/** Where to listen, and the command-line flag that sets the port (named when the port is taken). */
export interface ListenOptions {
  port: number;
  host: string;
  /** The flag that sets `port` (default `--port`). */
  portFlag?: string | undefined;
}

/** Listens on `options.port` and `options.host`; a port in use is a {@link ServeSetupError} saying what to do. */
export function listen(server: Server, options: ListenOptions): Promise<void> {
  return new Promise<void>((resolveListening, reject) => {
    const fail = (error: NodeJS.ErrnoException) =>
      reject(
        new ServeSetupError(
          error.code === 'EADDRINUSE'
            ? `port ${options.port} on ${options.host} is in use; pass ${options.portFlag ?? '--port'} <another> (0 picks a free one).`
            : `cannot listen on ${options.host}:${options.port}: ${error.message}`,
        ),
      );
    server.once('error', fail);
    server.listen(options.port, options.host, () => resolveListening());
  });
}

/** `http://<host>:<port>` of a listening address, IPv6 hosts in brackets. */
export function urlOf(address: AddressInfo): string {
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}`;
}
