/** Finds a TCP port on the loopback interface that nothing listens on right now. */
import { createServer } from 'node:net';

/** Resolves to a port that was free a moment ago (the OS picked it; another process could still take it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (address !== null && typeof address === 'object') resolve(address.port);
        else reject(new Error('the OS did not report a port'));
      });
    });
  });
}
