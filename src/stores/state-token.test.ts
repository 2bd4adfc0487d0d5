import { createHash, createHmac } from 'node:crypto';
import { deflateRawSync, deflateSync, gzipSync, inflateRawSync } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BatonError, InvalidArgumentError } from '../core/errors.js';
import { createState, type OrchestrationState } from '../core/state.js';
import {
  DEFAULT_STATE_TOKEN_MAX_LENGTH,
  decodeStateToken,
  encodeStateToken,
  MAX_STATE_PAYLOAD_BYTES,
  parseStateKeys,
  StateTokenError,
  StateTokenErrorReason,
} from './state-token.js';

const K1 = 'k1-0123456789abcdef0123456789abcdef';
const K2 = 'k2-fedcba9876543210fedcba9876543210';
const K3 = new Uint8Array(32).map((_, i) => (i * 37 + 11) & 0xff);
const T0 = 1_700_000_000_000;
const clock = (at: number) => () => at;

function sampleState(overrides: Partial<OrchestrationState> = {}): OrchestrationState {
  return {
    ...createState('session-1', T0),
    activeStep: 'research',
    recentlyUsedTools: ['search', 'fetch', 'search'],
    sequenceIndex: 2,
    cumulativeTokenUsage: { promptTokens: 120, completionTokens: 30, totalTokens: 150 },
    lastMessageKey: 'm-7',
    ...overrides,
  };
}

function kidOf(key: string | Uint8Array): string {
  return createHash('sha256').update(key).digest().subarray(0, 8).toString('base64url');
}

type Version = 'v1' | 'v2';

/** The payload part of the documented format: `v2` deflates the JSON (level 6), `v1` does not. */
function payloadOf(json: string | Buffer, version: Version): string {
  const bytes = Buffer.from(json);
  return (version === 'v2' ? deflateRawSync(bytes, { level: 6 }) : bytes).toString('base64url');
}

/** The JSON a token's payload part holds, for either version. */
function jsonOf(payload: string, version: Version): string {
  const bytes = Buffer.from(payload, 'base64url');
  return (version === 'v2' ? inflateRawSync(bytes) : bytes).toString('utf8');
}

/** Signs `<version>.<kid of key>.<payload>` as the documented format says, whatever the payload holds. */
function signRaw(key: string | Uint8Array, version: string, payload: string): string {
  const body = `${version}.${kidOf(key)}.${payload}`;
  return `${body}.${createHmac('sha256', key).update(body).digest('base64url')}`;
}

/** Builds a token by hand from the documented format, so the tests pin the format down. */
function handSign(key: string | Uint8Array, json: string | Buffer, version: Version = 'v2'): string {
  return signRaw(key, version, payloadOf(json, version));
}

/**
 * A token issued by Baton before `v2` (the encoder of commit fc53ff2): `sampleState()` signed with
 * K1 at T0, ttl 1000. Kept verbatim, so that decoding it proves such tokens still work.
 */
const V1_TOKEN =
  'v1.Ydz_dvfB_Lw.eyJzIjp7InNlc3Npb25JZCI6InNlc3Npb24tMSIsImFjdGl2ZVN0ZXAiOiJyZXNlYXJjaCIsInJlY2VudGx5VXNlZFRvb2xzIjpbInNlYXJjaCIsImZldGNoIiwic2VhcmNoIl0sInNlcXVlbmNlSW5kZXgiOjIsImN1bXVsYXRpdmVUb2tlblVzYWdlIjp7InByb21wdFRva2VucyI6MTIwLCJjb21wbGV0aW9uVG9rZW5zIjozMCwidG90YWxUb2tlbnMiOjE1MH0sImNyZWF0ZWRBdCI6MTcwMDAwMDAwMDAwMCwibGFzdEFjY2Vzc2VkIjoxNzAwMDAwMDAwMDAwLCJ0dGwiOjg2NDAwMDAwLCJ2ZXJzaW9uIjowLCJsYXN0TWVzc2FnZUtleSI6Im0tNyJ9LCJleHAiOjE3MDAwMDAwMDEwMDB9.LhOCv68hxG9gZ3E557YSDYEg02B54btVNvWjDhWI4KU';

/** The error `decodeStateToken` throws, or undefined when it accepted the token. */
function rejection(token: string, keys: readonly (string | Uint8Array)[] = [K1], now = T0): unknown {
  try {
    decodeStateToken(token, { keys, now: clock(now) });
    return undefined;
  } catch (error) {
    return error;
  }
}

function reasonOf(token: string, keys: readonly (string | Uint8Array)[] = [K1], now = T0): string {
  const error = rejection(token, keys, now);
  if (error === undefined) return 'accepted';
  if (!StateTokenError.isInstance(error)) throw error;
  return error.reason;
}

// Strings of arbitrary UTF-16 code units (lone surrogates included) and of whole code points.
const textArb = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 30 }),
  fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)), maxLength: 30 }),
);
const countArb = fc.oneof(fc.nat({ max: 1000 }), fc.nat({ max: Number.MAX_SAFE_INTEGER }));
const stateArb: fc.Arbitrary<OrchestrationState> = fc.record(
  {
    sessionId: textArb.filter((s) => s.length > 0),
    activeStep: textArb,
    recentlyUsedTools: fc.array(textArb, { maxLength: 50 }),
    sequenceIndex: countArb,
    cumulativeTokenUsage: fc.record(
      { promptTokens: countArb, completionTokens: countArb, totalTokens: countArb },
      { noNullPrototype: true },
    ),
    createdAt: countArb,
    lastAccessed: countArb,
    ttl: countArb,
    version: countArb,
    lastMessageKey: textArb,
  },
  {
    // JSON gives plain objects back; null-prototype inputs would differ only in prototype.
    noNullPrototype: true,
    requiredKeys: [
      'sessionId',
      'recentlyUsedTools',
      'sequenceIndex',
      'cumulativeTokenUsage',
      'createdAt',
      'lastAccessed',
      'ttl',
      'version',
    ],
  },
);

describe('state token format', () => {
  it('is v2.<kid>.<payload>.<signature>, URL-safe, with kid = first 8 bytes of SHA-256(key)', () => {
    const token = encodeStateToken(sampleState(), { keys: [K1], now: clock(T0), ttl: 1000 });
    expect(token).toMatch(/^v2\.[A-Za-z0-9_-]{11}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    expect(encodeURIComponent(token)).toBe(token);
    const [, kid, payload] = token.split('.') as [string, string, string, string];
    expect(kid).toBe(kidOf(K1));
    // The payload is raw deflate of the JSON (no zlib or gzip header), and the HMAC covers it compressed.
    expect(JSON.parse(jsonOf(payload, 'v2'))).toEqual({ s: sampleState(), exp: T0 + 1000 });
    expect(handSign(K1, JSON.stringify({ s: sampleState(), exp: T0 + 1000 }))).toBe(token);
  });

  it('accepts a token built by hand from the documented format', () => {
    const token = handSign(K3, JSON.stringify({ s: sampleState(), exp: T0 + 1 }));
    expect(decodeStateToken(token, { keys: [K3], now: clock(T0) })).toEqual(sampleState());
  });

  it('still decodes a v1 token issued before compression, until it expires', () => {
    expect(V1_TOKEN.split('.')[1]).toBe(kidOf(K1));
    expect(decodeStateToken(V1_TOKEN, { keys: [K1], now: clock(T0) })).toEqual(sampleState());
    expect(decodeStateToken(V1_TOKEN, { keys: [K2, K1], now: clock(T0 + 999) })).toEqual(sampleState());
    expect(reasonOf(V1_TOKEN, [K1], T0 + 1000)).toBe('expired');
    expect(reasonOf(V1_TOKEN, [K2])).toBe('unknown-key');
    // The same, built by hand, with a key given as bytes.
    const token = handSign(K3, JSON.stringify({ s: sampleState(), exp: T0 + 1 }), 'v1');
    expect(decodeStateToken(token, { keys: [K3], now: clock(T0) })).toEqual(sampleState());
  });

  it('never issues v1', () => {
    const v1 = JSON.parse(jsonOf(V1_TOKEN.split('.')[2]!, 'v1'));
    const reissued = encodeStateToken(v1.s, { keys: [K1], now: clock(T0), ttl: 1000 });
    expect(reissued.startsWith('v2.')).toBe(true);
    expect(reissued.length).toBeLessThan(V1_TOKEN.length);
  });

  it('compresses a long session to under two thirds of its v1 length', () => {
    // 256 ids like hosted providers' (`call_` and 24 random base62 characters) compress poorly,
    // and they are most of a long session's state.
    const base62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
    const toolCallIds = Array.from({ length: 256 }, (_, i) => {
      const digest = createHash('sha256').update(`id ${i}`).digest();
      return `call_${Array.from(digest.subarray(0, 24), (byte) => base62[byte % 62]).join('')}`;
    });
    const state = sampleState({ toolCallIds });
    const token = encodeStateToken(state, { keys: [K1], now: clock(T0) });
    const v1 = handSign(K1, JSON.stringify({ s: state, exp: T0 + 86_400_000 }), 'v1');
    expect(decodeStateToken(v1, { keys: [K1], now: clock(T0) })).toEqual(state);
    expect(decodeStateToken(token, { keys: [K1], now: clock(T0) })).toEqual(state);
    expect(token.length / v1.length).toBeLessThan(0.65);
  });
});

describe('round trip', () => {
  it('preserves any state exactly', () => {
    fc.assert(
      fc.property(stateArb, fc.constantFrom<(string | Uint8Array)[]>([K1], [K3, K1]), (state, keys) => {
        const token = encodeStateToken(state, { keys, now: clock(T0) });
        expect(decodeStateToken(token, { keys, now: clock(T0) })).toStrictEqual(state);
      }),
      { numRuns: 300, seed: 42 },
    );
  });

  it('keeps a key given as a multi-byte UTF-8 string and as bytes apart', () => {
    const unicodeKey = 'ключ-ключ-ключ-ключ'; // 19 characters, 35 bytes
    const token = encodeStateToken(sampleState(), { keys: [unicodeKey], now: clock(T0) });
    expect(decodeStateToken(token, { keys: [Buffer.from(unicodeKey, 'utf8')], now: clock(T0) })).toEqual(sampleState());
  });
});

describe('facts and labels', () => {
  const state = sampleState({
    facts: {
      quote: { value: { id: 'q1', amount: 120 } },
      listed_ids: { value: ['a', 'b'] },
      summary: { unknown: 'its value could not be computed (no such key: text)' },
    },
    labels: ['confidential'],
  });
  const token = encodeStateToken(state, { keys: [K1], now: clock(T0) });
  const [version, kid, payload, signature] = token.split('.') as [Version, string, string, string];
  /** The token's payload with `change` made to its state, under the original signature. */
  const forged = (change: (s: OrchestrationState) => void): string => {
    const body = JSON.parse(jsonOf(payload, version)) as { s: OrchestrationState; exp: number };
    change(body.s);
    return `${version}.${kid}.${payloadOf(JSON.stringify(body), version)}.${signature}`;
  };

  it('carries them in the signed payload, and gives them back exactly', () => {
    expect((JSON.parse(jsonOf(payload, version)) as { s: OrchestrationState }).s).toMatchObject({
      facts: state.facts,
      labels: ['confidential'],
    });
    // toEqual: the state's unset optional fields (undefined) do not travel in JSON.
    expect(decodeStateToken(token, { keys: [K1], now: clock(T0) })).toEqual(state);
  });

  it('rejects a token whose fact or label was changed as bad-signature', () => {
    const cheaper = (s: OrchestrationState) => {
      s.facts!.quote = { value: { id: 'q1', amount: 1 } };
    };
    const known = (s: OrchestrationState) => {
      s.facts!.summary = { value: 'anything' };
    };
    const listed = (s: OrchestrationState) => {
      s.facts!.listed_ids = { value: ['a', 'b', 'everything'] };
    };
    const lowered = (s: OrchestrationState) => {
      s.labels = [];
    };
    for (const change of [cheaper, known, listed, lowered]) {
      expect(reasonOf(forged(change)), change.name).toBe('bad-signature');
      // The same state signed with the key is a valid token: only the signature stops the forgery.
      const body = JSON.parse(jsonOf(payload, version)) as { s: OrchestrationState; exp: number };
      change(body.s);
      expect(reasonOf(handSign(K1, JSON.stringify(body), version)), change.name).toBe('accepted');
    }
  });
});

describe('key rotation', () => {
  const token = encodeStateToken(sampleState(), { keys: [K1], now: clock(T0) });

  it('accepts a token signed with any listed key', () => {
    expect(decodeStateToken(token, { keys: [K2, K1], now: clock(T0) })).toEqual(sampleState());
  });

  it('rejects a token whose key is no longer listed as unknown-key', () => {
    const error = rejection(token, [K2]);
    expect(StateTokenError.isInstance(error) && error.reason).toBe('unknown-key');
    expect(String((error as Error).message)).toMatch(/rotat/);
  });

  it('signs with the first key', () => {
    const rotated = encodeStateToken(sampleState(), { keys: [K2, K1], now: clock(T0) });
    expect(rotated.split('.')[1]).toBe(kidOf(K2));
    expect(reasonOf(rotated, [K2])).toBe('accepted');
    expect(reasonOf(rotated, [K1])).toBe('unknown-key');
  });
});

/** A token of `version` carrying `sampleState()` with expiry T0 + 1000: issued (v2) or as an older release issued it (v1). */
function tokenOf(version: Version): string {
  return version === 'v2'
    ? encodeStateToken(sampleState(), { keys: [K1], now: clock(T0), ttl: 1000 })
    : handSign(K1, JSON.stringify({ s: sampleState(), exp: T0 + 1000 }), 'v1');
}

describe.each(['v2', 'v1'] as const)('rejections of %s tokens', (version) => {
  const token = tokenOf(version);
  const [, kid, payload, signature] = token.split('.') as [string, string, string, string];

  it('accepts the token itself', () => {
    expect(reasonOf(token)).toBe('accepted');
  });

  it('rejects an altered payload as bad-signature', () => {
    const forged = payloadOf(JSON.stringify({ s: sampleState({ sequenceIndex: 99 }), exp: T0 + 1000 }), version);
    expect(reasonOf(`${version}.${kid}.${forged}.${signature}`)).toBe('bad-signature');
    // One character changed within the alphabet keeps the base64url canonical: only the HMAC catches it.
    const altered = `${payload[0] === 'A' ? 'B' : 'A'}${payload.slice(1)}`;
    expect(reasonOf(`${version}.${kid}.${altered}.${signature}`)).toBe('bad-signature');
  });

  it('rejects a signature made with another key under the right kid as bad-signature', () => {
    const otherSignature = createHmac('sha256', K2).update(`${version}.${kid}.${payload}`).digest('base64url');
    expect(reasonOf(`${version}.${kid}.${payload}.${otherSignature}`)).toBe('bad-signature');
  });

  it('rejects a token relabelled with the other version as bad-signature', () => {
    // The version is signed, so a v1 payload cannot pass as v2 (or back) without the key.
    const other = version === 'v1' ? 'v2' : 'v1';
    expect(reasonOf(`${other}.${kid}.${payload}.${signature}`)).toBe('bad-signature');
  });

  it('rejects a token whose key is no longer listed as unknown-key', () => {
    expect(reasonOf(token, [K2])).toBe('unknown-key');
    expect(reasonOf(token, [K2, K1])).toBe('accepted');
  });

  it('rejects a truncated token as truncated', () => {
    for (const length of [1, 2, 3, 10, 14, 15, 30, token.length - 43, token.length - 44, token.length - 1]) {
      expect([length, reasonOf(token.slice(0, length))]).toEqual([length, 'truncated']);
    }
  });

  it('classifies every prefix of a token as truncated or malformed', () => {
    for (let length = 0; length < token.length; length++) {
      expect(['truncated', 'malformed']).toContain(reasonOf(token.slice(0, length)));
    }
  });

  it('rejects an expired token, checking the clock it is given', () => {
    expect(reasonOf(token, [K1], T0 + 999)).toBe('accepted');
    const error = rejection(token, [K1], T0 + 1000);
    expect(StateTokenError.isInstance(error) && error.reason).toBe('expired');
    expect((error as Error).message).toContain(new Date(T0 + 1000).toISOString());
  });

  it('checks the signature before the expiry', () => {
    const altered = `${version}.${kid}.${payload.slice(0, -2)}${payload.slice(-2) === 'AA' ? 'BA' : 'AA'}.${signature}`;
    expect(reasonOf(altered, [K1], T0 + 5000)).not.toBe('expired');
    expect(['bad-signature', 'malformed']).toContain(reasonOf(altered, [K1], T0 + 5000));
  });

  it('rejects garbage as malformed', () => {
    for (const garbage of [
      '',
      'hello',
      'null',
      '{"s":{}}',
      `${version}....`,
      `${version}.a.b.c.d`,
      'v2.x.y.z',
      'V1.abc.def.ghi',
      'V2.abc.def.ghi',
      `${token}.`,
      `${token}=`,
      `${token} `,
      ` ${token}`,
      `${token}\n`,
      `${version.toUpperCase()}.${kid}.${payload}.${signature}`,
      `v3.${kid}.${payload}.${signature}`,
      `${version}.${kid}.${payload}.${signature.slice(0, 42)}!`,
      `${version}.${kid}.${payload}.${signature}AAAA`,
      `${version}.${kid}==.${payload}.${signature}`,
      `${version}.${kid}.${payload}=.${signature}`,
      `${version}.${kid}.${payload.replace(/.$/, '+')}.${signature}`,
      `${version}.${kid}..${signature}`,
      `${version}..${payload}.${signature}`,
    ]) {
      expect([garbage, reasonOf(garbage)]).toEqual([garbage, 'malformed']);
    }
  });

  it('rejects non-canonical base64url that Buffer would silently accept', () => {
    // The last signature character carries 2 unused bits; setting one gives the same bytes.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const last = alphabet.indexOf(signature.at(-1)!);
    const sibling = `${signature.slice(0, -1)}${alphabet[last ^ 1]}`;
    expect(Buffer.from(sibling, 'base64url')).toEqual(Buffer.from(signature, 'base64url'));
    expect(reasonOf(`${version}.${kid}.${payload}.${sibling}`)).toBe('malformed');
    // Buffer also skips characters outside the alphabet.
    expect(reasonOf(`${version}.${kid}.${payload.slice(0, 4)}*${payload.slice(4)}.${signature}`)).toBe('malformed');
  });

  it('rejects a token longer than maxLength before anything else', () => {
    expect(() => decodeStateToken(token, { keys: [K1], now: clock(T0), maxLength: token.length })).not.toThrow();
    const error = (() => {
      try {
        decodeStateToken(token, { keys: [K1], now: clock(T0), maxLength: token.length - 1 });
      } catch (e) {
        return e;
      }
    })();
    expect(StateTokenError.isInstance(error) && error.reason).toBe('malformed');
    expect((error as Error).message).toContain(`limit is ${token.length - 1}`);
  });

  it('rejects a validly signed payload that is not a state as invalid-state', () => {
    const payloads = [
      JSON.stringify({ s: { ...sampleState(), sessionId: 7 }, exp: T0 + 1 }),
      JSON.stringify({ s: { ...sampleState(), recentlyUsedTools: 'search' }, exp: T0 + 1 }),
      JSON.stringify({ s: { ...sampleState(), sequenceIndex: -1 }, exp: T0 + 1 }),
      JSON.stringify({ s: null, exp: T0 + 1 }),
      JSON.stringify({ exp: T0 + 1 }),
      JSON.stringify({ s: sampleState() }),
      JSON.stringify({ s: sampleState(), exp: '9999999999999' }),
      JSON.stringify({ s: sampleState(), exp: T0 + 1, admin: true }),
      JSON.stringify([sampleState()]),
      JSON.stringify(sampleState()),
      'not json',
      Buffer.from([0x7b, 0xff, 0xfe, 0x7d]),
    ];
    for (const body of payloads) {
      expect([String(body), reasonOf(handSign(K1, body, version))]).toEqual([String(body), 'invalid-state']);
    }
    const error = rejection(handSign(K1, payloads[0]!, version));
    expect((error as Error).message).toContain('token.s.sessionId');
    expect((error as StateTokenError).cause).toBeInstanceOf(InvalidArgumentError);
  });
});

describe('rejections', () => {
  it('rejects a correctly signed token of another version as malformed', () => {
    for (const version of ['v0', 'v3', 'v12', 'V2', '2']) {
      const token = signRaw(K1, version, payloadOf(JSON.stringify({ s: sampleState(), exp: T0 + 1 }), 'v2'));
      expect([version, reasonOf(token)]).toEqual([version, 'malformed']);
    }
  });

  it('rejects an overlong string before anything else, a value that is not a string, and a bad maxLength', () => {
    expect(reasonOf('x'.repeat(DEFAULT_STATE_TOKEN_MAX_LENGTH + 1))).toBe('malformed');
    expect(() => decodeStateToken(tokenOf('v2'), { keys: [K1], maxLength: 0 })).toThrow(InvalidArgumentError);
    for (const value of [undefined, null, 42, {}, ['v2']]) {
      expect(reasonOf(value as unknown as string)).toBe('malformed');
    }
  });

  it('expires after 24 hours by default', () => {
    const daily = encodeStateToken(sampleState(), { keys: [K1], now: clock(T0) });
    expect(reasonOf(daily, [K1], T0 + 86_400_000 - 1)).toBe('accepted');
    expect(reasonOf(daily, [K1], T0 + 86_400_000)).toBe('expired');
  });

  const json = JSON.stringify({ s: sampleState(), exp: T0 + 1000 });
  const deflated = deflateRawSync(Buffer.from(json), { level: 6 });
  /** Validly signed v2 payloads that are not exactly one raw deflate stream of at most the bound. */
  const notDeflate: [string, Buffer][] = [
    ['plain JSON (a v1 payload)', Buffer.from(json)],
    ['a zlib stream', deflateSync(json)],
    ['a gzip stream', gzipSync(json)],
    ['a cut-short stream', deflated.subarray(0, deflated.length - 4)],
    ['a stream with bytes after it', Buffer.concat([deflated, Buffer.from('{"admin":true}')])],
    ['one zero byte', Buffer.from([0])],
    ['random bytes', createHash('sha512').update('noise').digest()],
  ];

  it('rejects a validly signed v2 payload that does not inflate as invalid-state', () => {
    for (const [what, bytes] of notDeflate) {
      const error = rejection(signRaw(K1, 'v2', bytes.toString('base64url')));
      expect([what, StateTokenError.isInstance(error) && error.reason]).toEqual([what, 'invalid-state']);
      expect((error as Error).message).toMatch(/not raw deflate data|bytes after its deflate stream/);
    }
  });

  it('stops inflating at MAX_STATE_PAYLOAD_BYTES, so a compression bomb fails fast', () => {
    // 16 KiB of deflate that would inflate to 16 MiB of zeros.
    const bomb = deflateRawSync(Buffer.alloc(16 * 1024 * 1024), { level: 9 });
    expect(bomb.length).toBeLessThan(20_000);
    const started = performance.now();
    const error = rejection(signRaw(K1, 'v2', bomb.toString('base64url')));
    expect(performance.now() - started).toBeLessThan(500);
    expect(StateTokenError.isInstance(error) && error.reason).toBe('invalid-state');
    expect((error as Error).message).toContain(`inflates to more than ${MAX_STATE_PAYLOAD_BYTES} bytes`);
    // A payload exactly at the bound still inflates (and then fails as JSON, being zeros).
    const atBound = signRaw(K1, 'v2', deflateRawSync(Buffer.alloc(MAX_STATE_PAYLOAD_BYTES)).toString('base64url'));
    expect((rejection(atBound) as Error).message).toContain('not UTF-8 JSON');
  });

  it('touches the payload only after the signature verified', () => {
    // Unsigned (wrong key, or altered) payloads that would not inflate, or would be a bomb, are
    // classified by their signature: nothing was inflated before it was checked.
    const bomb = deflateRawSync(Buffer.alloc(16 * 1024 * 1024), { level: 9 }).toString('base64url');
    for (const [, bytes] of [...notDeflate, ['bomb', Buffer.from(bomb, 'base64url')] as [string, Buffer]]) {
      const payload = bytes.toString('base64url');
      const forged = `v2.${kidOf(K1)}.${payload}.${createHmac('sha256', K2)
        .update(`v2.${kidOf(K1)}.${payload}`)
        .digest('base64url')}`;
      expect(reasonOf(forged)).toBe('bad-signature');
      expect(reasonOf(signRaw(K2, 'v2', payload))).toBe('unknown-key');
    }
  });
});

describe('StateTokenError', () => {
  it('is a BatonError with code state-token, a reason and an isInstance check', () => {
    const error = rejection('garbage');
    expect(error).toBeInstanceOf(StateTokenError);
    expect(error).toBeInstanceOf(BatonError);
    expect(BatonError.isInstance(error)).toBe(true);
    expect(StateTokenError.isInstance(error)).toBe(true);
    expect((error as StateTokenError).code).toBe('state-token');
    expect((error as StateTokenError).name).toBe('StateTokenError');
    expect((error as Error).message).toMatch(/^State token rejected \(malformed\): .+; .+\.$/);
    expect(StateTokenError.isInstance(new InvalidArgumentError('x', 'y'))).toBe(false);
    expect(StateTokenError.isInstance(new Error('state-token'))).toBe(false);
  });

  it('lists every reason', () => {
    expect(Object.values(StateTokenErrorReason).sort()).toEqual(
      ['bad-signature', 'expired', 'invalid-state', 'malformed', 'truncated', 'unknown-key'].sort(),
    );
    for (const reason of Object.values(StateTokenErrorReason)) {
      expect(new StateTokenError(reason, 'detail').message).toContain(`(${reason})`);
    }
  });
});

describe('arguments', () => {
  it('rejects keys shorter than 32 bytes, without echoing them', () => {
    const short = 'a'.repeat(31);
    for (const keys of [[short], [K1, short], [new Uint8Array(31)]]) {
      let error: unknown;
      try {
        encodeStateToken(sampleState(), { keys });
      } catch (e) {
        error = e;
      }
      expect(InvalidArgumentError.isInstance(error)).toBe(true);
      expect((error as Error).message).toMatch(/31 bytes long; use at least 32/);
      expect((error as Error).message).not.toContain(short);
      expect(() => decodeStateToken('v1.x.y.z', { keys })).toThrow(InvalidArgumentError);
    }
    expect(() => encodeStateToken(sampleState(), { keys: ['a'.repeat(32)] })).not.toThrow();
    expect(() => encodeStateToken(sampleState(), { keys: ['é'.repeat(16)] })).not.toThrow(); // 32 bytes
  });

  it('rejects an empty or missing key list and keys of the wrong type', () => {
    expect(() => encodeStateToken(sampleState(), { keys: [] })).toThrow(/no keys given/);
    expect(() => decodeStateToken('x', { keys: [] })).toThrow(InvalidArgumentError);
    expect(() => decodeStateToken('x', { keys: 'k'.repeat(40) as unknown as string[] })).toThrow(InvalidArgumentError);
    expect(() => encodeStateToken(sampleState(), { keys: [42 as unknown as string] })).toThrow(/keys\[0\]/);
  });

  it('rejects a bad ttl, a broken clock and an invalid state when encoding', () => {
    for (const ttl of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => encodeStateToken(sampleState(), { keys: [K1], ttl })).toThrow(InvalidArgumentError);
    }
    expect(() => encodeStateToken(sampleState(), { keys: [K1], now: () => Number.NaN })).toThrow(InvalidArgumentError);
    const bad = { ...sampleState(), version: -1 };
    expect(() => encodeStateToken(bad, { keys: [K1] })).toThrow(/state\.version/);
  });

  it('refuses a state of more JSON than decoding inflates, and issues one of exactly that much', () => {
    // Decoding stops inflating at MAX_STATE_PAYLOAD_BYTES: a token must never carry more.
    const exp = T0 + 86_400_000;
    const fixed = Buffer.byteLength(JSON.stringify({ s: sampleState({ lastMessageKey: '' }), exp }));
    const withKey = (length: number) => sampleState({ lastMessageKey: 'x'.repeat(length) });
    const largest = withKey(MAX_STATE_PAYLOAD_BYTES - fixed);
    expect(Buffer.byteLength(JSON.stringify({ s: largest, exp }))).toBe(MAX_STATE_PAYLOAD_BYTES);
    const token = encodeStateToken(largest, { keys: [K1], now: clock(T0) });
    expect(decodeStateToken(token, { keys: [K1], now: clock(T0) })).toEqual(largest);
    expect(() =>
      encodeStateToken(withKey(MAX_STATE_PAYLOAD_BYTES - fixed + 1), { keys: [K1], now: clock(T0) }),
    ).toThrow(
      new RegExp(
        `state.*${MAX_STATE_PAYLOAD_BYTES + 1} bytes of JSON; a state token carries at most ${MAX_STATE_PAYLOAD_BYTES}`,
      ),
    );
  });

  it('fails closed when the decoding clock is broken', () => {
    const token = encodeStateToken(sampleState(), { keys: [K1], now: clock(T0) });
    expect(() => decodeStateToken(token, { keys: [K1], now: () => Number.NaN })).toThrow(InvalidArgumentError);
  });
});

describe('parseStateKeys', () => {
  it('splits on commas, trims, keeps order (the first signs)', () => {
    expect(parseStateKeys(` ${K2} ,\n${K1}\t`)).toEqual([K2, K1]);
    expect(parseStateKeys(K1)).toEqual([K1]);
    const keys = parseStateKeys(`${K2},${K1}`);
    const token = encodeStateToken(sampleState(), { keys, now: clock(T0) });
    expect(reasonOf(token, [K2])).toBe('accepted');
  });

  it('names an empty entry', () => {
    expect(() => parseStateKeys(`${K1},,${K2}`)).toThrow(/key 2 of 3 is empty/);
    expect(() => parseStateKeys(`${K1},`)).toThrow(/key 2 of 2 is empty/);
    expect(() => parseStateKeys(` , ${K1}`)).toThrow(/key 1 of 2 is empty/);
  });

  it('rejects an empty value and short keys', () => {
    for (const value of ['', '   ', '\n']) {
      expect(() => parseStateKeys(value)).toThrow(/BATON_STATE_KEYS.*no keys given/);
    }
    expect(() => parseStateKeys(`${K1},short`)).toThrow(/BATON_STATE_KEYS\[1\].*5 bytes long/);
  });
});

// --- Fuzzing -------------------------------------------------------------------------------

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const charArb = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...ALPHABET) },
  { weight: 2, arbitrary: fc.constantFrom('.', '=', '+', '/', ' ', '\n', '%', '\u0000', 'é', '\ud800', '😀') },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }) },
);

type Mutation =
  | { kind: 'replace' | 'insert'; position: number; char: string }
  | { kind: 'delete'; position: number; count: number }
  | { kind: 'truncate'; position: number }
  | { kind: 'swap-segments'; i: number; j: number }
  | { kind: 'duplicate-segment'; i: number; at: number }
  | { kind: 'drop-segment'; i: number }
  | { kind: 'splice-segment'; from: number; i: number }
  | { kind: 'toggle-case'; position: number }
  | { kind: 'case-all'; upper: boolean }
  | { kind: 'append' | 'prepend'; text: string }
  | { kind: 'flip-bit'; segment: 1 | 2 | 3; bit: number }
  | { kind: 'unused-bits'; segment: 1 | 2 | 3; bits: number }
  | { kind: 'reissue-payload'; exp: number; sequenceIndex: number };

const positionArb = fc.nat({ max: 10_000 });
const segmentArb = fc.nat({ max: 3 });
const singleMutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constantFrom('replace' as const, 'insert' as const), position: positionArb, char: charArb }),
  fc.record({ kind: fc.constant('delete' as const), position: positionArb, count: fc.integer({ min: 1, max: 20 }) }),
  fc.record({ kind: fc.constant('truncate' as const), position: positionArb }),
  fc.record({ kind: fc.constant('swap-segments' as const), i: segmentArb, j: segmentArb }),
  fc.record({ kind: fc.constant('duplicate-segment' as const), i: segmentArb, at: fc.nat({ max: 4 }) }),
  fc.record({ kind: fc.constant('drop-segment' as const), i: segmentArb }),
  fc.record({ kind: fc.constant('splice-segment' as const), from: fc.nat(), i: segmentArb }),
  fc.record({ kind: fc.constant('toggle-case' as const), position: positionArb }),
  fc.record({ kind: fc.constant('case-all' as const), upper: fc.boolean() }),
  fc.record({
    kind: fc.constantFrom('append' as const, 'prepend' as const),
    text: fc.oneof(fc.string({ minLength: 1, maxLength: 8 }), fc.stringMatching(/^[.=A-Za-z0-9_-]{1,8}$/)),
  }),
  fc.record({
    kind: fc.constant('flip-bit' as const),
    segment: fc.constantFrom(1 as const, 2 as const, 3 as const),
    bit: fc.nat(),
  }),
  fc.record({
    kind: fc.constant('unused-bits' as const),
    segment: fc.constantFrom(1 as const, 2 as const, 3 as const),
    bits: fc.integer({ min: 1, max: 3 }),
  }),
  fc.record({ kind: fc.constant('reissue-payload' as const), exp: fc.nat(), sequenceIndex: fc.nat({ max: 5 }) }),
);
const mutationsArb = fc.array(singleMutationArb, { minLength: 1, maxLength: 3 });

function flipBitIn(segment: string, bit: number): string {
  const bytes = Buffer.from(segment, 'base64url');
  if (bytes.length === 0) return segment;
  const index = bit % (bytes.length * 8);
  bytes[index >> 3]! ^= 1 << (index & 7);
  return bytes.toString('base64url');
}

function applyMutation(token: string, mutation: Mutation, pool: readonly string[]): string {
  const at = (position: number, extra = 0) => position % (token.length + extra);
  const segments = token.split('.');
  const segment = (i: number) => i % segments.length;
  switch (mutation.kind) {
    case 'replace': {
      const p = at(mutation.position);
      return token.slice(0, p) + mutation.char + token.slice(p + 1);
    }
    case 'insert': {
      const p = at(mutation.position, 1);
      return token.slice(0, p) + mutation.char + token.slice(p);
    }
    case 'delete': {
      const p = at(mutation.position);
      return token.slice(0, p) + token.slice(p + mutation.count);
    }
    case 'truncate':
      return token.slice(0, at(mutation.position));
    case 'swap-segments': {
      const copy = segments.slice();
      const i = segment(mutation.i);
      const j = segment(mutation.j);
      [copy[i], copy[j]] = [copy[j]!, copy[i]!];
      return copy.join('.');
    }
    case 'duplicate-segment': {
      const copy = segments.slice();
      copy.splice(mutation.at % (copy.length + 1), 0, segments[segment(mutation.i)]!);
      return copy.join('.');
    }
    case 'drop-segment':
      return segments.filter((_, index) => index !== segment(mutation.i)).join('.');
    case 'splice-segment': {
      // One part from another valid token: each part alone must not carry over.
      const donor = pool[mutation.from % pool.length]!.split('.');
      const copy = segments.slice();
      const i = segment(mutation.i);
      copy[i] = donor[i % donor.length]!;
      return copy.join('.');
    }
    case 'toggle-case': {
      const p = at(mutation.position);
      const c = token[p] ?? '';
      const toggled = c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase();
      return token.slice(0, p) + toggled + token.slice(p + 1);
    }
    case 'case-all':
      return mutation.upper ? token.toUpperCase() : token.toLowerCase();
    case 'append':
      return token + mutation.text;
    case 'prepend':
      return mutation.text + token;
    case 'flip-bit': {
      if (segments.length !== 4) return token;
      const copy = segments.slice();
      copy[mutation.segment] = flipBitIn(copy[mutation.segment]!, mutation.bit);
      return copy.join('.');
    }
    case 'unused-bits': {
      // Sets the low bits of a part's last character, which a lenient decoder ignores: same
      // bytes, different string, so only a canonical-encoding check rejects it.
      if (segments.length !== 4) return token;
      const copy = segments.slice();
      const part = copy[mutation.segment]!;
      const index = ALPHABET.indexOf(part.at(-1) ?? '');
      if (index < 0) return token;
      copy[mutation.segment] = part.slice(0, -1) + ALPHABET[index ^ mutation.bits];
      return copy.join('.');
    }
    case 'reissue-payload': {
      // An attacker rewriting the payload (later expiry, other progress) without the key.
      if (segments.length !== 4) return token;
      const version = segments[0] === 'v1' ? 'v1' : 'v2';
      let envelope: { s: OrchestrationState; exp: number };
      try {
        envelope = JSON.parse(jsonOf(segments[2]!, version));
      } catch {
        return token;
      }
      // An earlier mutation may have left JSON that is not an envelope.
      if (typeof envelope?.s?.sequenceIndex !== 'number' || typeof envelope.exp !== 'number') return token;
      const forged = {
        s: { ...envelope.s, sequenceIndex: envelope.s.sequenceIndex + mutation.sequenceIndex },
        exp: envelope.exp + mutation.exp,
      };
      const copy = segments.slice();
      copy[2] = payloadOf(JSON.stringify(forged), version);
      return copy.join('.');
    }
  }
}

describe('fuzzing', () => {
  const keys = [K1, K3];
  const pool = [
    encodeStateToken(sampleState(), { keys: [K1], now: clock(T0) }),
    encodeStateToken(sampleState({ sessionId: 'other', sequenceIndex: 0 }), { keys: [K1], now: clock(T0) }),
    encodeStateToken(sampleState({ recentlyUsedTools: [] }), { keys: [K3], now: clock(T0) }),
    encodeStateToken(createState('s', T0), { keys: [K3], now: clock(T0), ttl: 5 }),
    encodeStateToken(sampleState({ activeStep: 'ünïcödé 😀' }), { keys: [K2], now: clock(T0) }),
    // Tokens an older release issued are still accepted, so they are fuzzed too.
    V1_TOKEN,
    handSign(K3, JSON.stringify({ s: sampleState({ sessionId: 'old' }), exp: T0 + 60_000 }), 'v1'),
  ];
  const decode = (token: string) => decodeStateToken(token, { keys: [...keys, K2], now: clock(T0) });

  it('accepts every unmutated token of the pool', () => {
    for (const token of pool) expect(() => decode(token)).not.toThrow();
  });

  it('rejects 10,000 mutated tokens, only ever with a StateTokenError', () => {
    const reasons = new Map<string, number>();
    let unchanged = 0;
    fc.assert(
      fc.property(fc.nat({ max: pool.length - 1 }), mutationsArb, (index, mutations) => {
        const original = pool[index]!;
        const mutated = mutations.reduce((token, mutation) => applyMutation(token, mutation, pool), original);
        if (mutated === original) {
          unchanged++;
          return;
        }
        let error: unknown;
        try {
          decode(mutated);
        } catch (e) {
          error = e;
        }
        if (error === undefined) throw new Error(`accepted a mutated token: ${JSON.stringify(mutated)}`);
        if (!(error instanceof StateTokenError) || !StateTokenError.isInstance(error)) throw error;
        reasons.set(error.reason, (reasons.get(error.reason) ?? 0) + 1);
      }),
      { numRuns: 10_000, seed: 0x5eed },
    );
    // The mutations must reach every check, not just the cheap syntax ones.
    for (const reason of ['malformed', 'truncated', 'bad-signature', 'unknown-key']) {
      expect([reason, (reasons.get(reason) ?? 0) > 50]).toEqual([reason, true]);
    }
    expect(unchanged).toBeLessThan(1000);
    expect([...reasons.values()].reduce((a, b) => a + b, 0) + unchanged).toBe(10_000);
  });

  it('rejects random strings, only ever with a StateTokenError', () => {
    const b64 = (max: number) => fc.stringMatching(new RegExp(`^[A-Za-z0-9_-]{0,${max}}$`));
    const randomArb = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 200 }),
      fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)), maxLength: 200 }),
      fc.string({ unit: fc.constantFrom(...`${ALPHABET}.=`), maxLength: 200 }),
      fc
        .tuple(fc.constantFrom('v1', 'v2'), b64(15), b64(200), b64(50))
        .map(([version, kid, payload, sig]) => `${version}.${kid}.${payload}.${sig}`),
      fc
        .tuple(fc.constantFrom('v1', 'v2'), b64(200), b64(50))
        .map(([version, payload, sig]) => `${version}.${kidOf(K1)}.${payload}.${sig}`),
    );
    fc.assert(
      fc.property(randomArb, (text) => {
        let error: unknown;
        try {
          decode(text);
        } catch (e) {
          error = e;
        }
        if (error === undefined) throw new Error(`accepted a random string: ${JSON.stringify(text)}`);
        if (!StateTokenError.isInstance(error)) throw error;
      }),
      { numRuns: 5_000, seed: 0xf022 },
    );
  });
});
