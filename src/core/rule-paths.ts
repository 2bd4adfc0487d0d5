/**
 * Paths in rules' `when` expressions: `path.normalizePath()` and `path.isWithinPath(folder)`,
 * methods on strings (CEL has no path functions of its own).
 *
 * Why: the first rule a filesystem user writes, `!args.path.startsWith('/srv/work/drafts/')`,
 * compares text, and `/srv/work/drafts/../secrets/x` passes it while the filesystem writes
 * `/srv/work/secrets/x`. These functions read a path as a POSIX filesystem does, lexically: `.`
 * is the folder itself, `..` its parent, repeated `/` are one. They are pure (no filesystem
 * access, so no symlink is followed: where a link points is the upstream's business) and take
 * time linear in the path's length, so no input can make a rule slow.
 *
 * What they do not decode: filesystems take `%2e%2e` as a name of six characters, not as `..`,
 * and so do these functions; on POSIX `\` is a character of a name, not a separator.
 */

/** A path's meaning in segments: absolute or not, and its names with `.` and `..` resolved. */
interface ParsedPath {
  readonly absolute: boolean;
  /** Names, outermost first; a relative path's leading `..` segments are kept. */
  readonly segments: readonly string[];
  /** How many leading `..` segments there are (0 for an absolute path). */
  readonly up: number;
}

function parsePath(path: string): ParsedPath {
  const absolute = path.startsWith('/');
  const segments: string[] = [];
  let up = 0;
  // One pass over the text: each segment is sliced once and pushed or popped once.
  let start = 0;
  for (let i = 0; i <= path.length; i++) {
    if (i < path.length && path.charCodeAt(i) !== 0x2f /* / */) continue;
    const segment = path.slice(start, i);
    start = i + 1;
    if (segment === '' || segment === '.') continue;
    if (segment !== '..') {
      segments.push(segment);
    } else if (segments.length > up) {
      segments.pop();
    } else if (!absolute) {
      // Above where a relative path starts: kept, since what is there depends on where it is
      // resolved from. Above the root of an absolute path is the root, as the filesystem says.
      segments.push('..');
      up++;
    }
  }
  return { absolute, segments, up };
}

/**
 * `path` normalised as a POSIX filesystem resolves it, without reading the filesystem: `.`
 * segments removed, each `..` removing the name before it, repeated `/` collapsed into one, a
 * leading `/` kept and a trailing one dropped. `..` above the root of an absolute path stays at
 * the root (`/../etc` is `/etc`); above the start of a relative path it is kept (`a/../../b` is
 * `../b`). A relative path that resolves to where it starts (or the empty path) is `.`.
 */
export function normalizePath(path: string): string {
  const { absolute, segments } = parsePath(path);
  const joined = segments.join('/');
  if (absolute) return `/${joined}`;
  return joined === '' ? '.' : joined;
}

/**
 * True when `path`, normalised (see {@link normalizePath}), is `folder` itself or names
 * something inside it, as the filesystem would see it without symlinks: `/srv/a/../b/x` is not
 * within `/srv/a`, `/srv/ab` is not within `/srv/a`, `/srv//a/./x` is. A relative path is never
 * within an absolute folder, nor an absolute path within a relative one: which folder a relative
 * path is in depends on the directory it is resolved from, which a rule does not know. Between
 * relative paths, a path that climbs above the folder's start is not within it (`../x` is not
 * within `.`, `x` is within `..`), and one that climbs to a named folder's side is not either
 * (`x` is not within `../a`: whether it is depends on the name of the directory it starts in).
 */
export function isPathWithin(path: string, folder: string): boolean {
  const inner = parsePath(path);
  const outer = parsePath(folder);
  if (inner.absolute !== outer.absolute) return false;
  // A folder that names nothing below where it starts (`/`, `.`, `..`, `../..`) holds every path
  // that climbs no higher than it does.
  if (outer.up === outer.segments.length) return inner.up <= outer.up;
  if (inner.segments.length < outer.segments.length) return false;
  for (let i = 0; i < outer.segments.length; i++) if (inner.segments[i] !== outer.segments[i]) return false;
  // `..` segments come first in a normalised path: more of them than the folder has climb out.
  return inner.up === outer.up;
}
