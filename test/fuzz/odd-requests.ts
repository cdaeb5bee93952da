// The parts of a request around its body that the fuzzer varies: query strings, headers (Accept,
// Last-Event-ID and others), Authorization and event tokens, path ids, paths and methods no operation
// has, request targets that are not a path and odd Host headers, and bytes that are not well-formed
// HTTP at all.
import type { Rng } from './random.js'
import type { Operation } from './openapi-model.js'
import type { Spec, Tenant, World } from './requests.js'

type Partial = Omit<Spec, 'i' | 'kind'>

/** Ids (percent-encoded as sent) of the wrong shape or of another tenant. */
export function wrongId(r: Rng, world: World, tenant: Tenant): { value: string; crossTenant: boolean } {
  const others = world.sessions.filter((s) => s.tenant !== tenant)
  if (others.length && r.chance(0.35)) return { value: r.pick(others).id, crossTenant: true }
  const value = r.pick([
    '',
    'x'.repeat(64),
    'x'.repeat(65),
    'x'.repeat(101),
    'x'.repeat(3000),
    'ses_' + 'A'.repeat(19),
    'ses_' + 'A'.repeat(21),
    'SES_AAAAAAAAAAAAAAAAAAAA',
    '%FF',
    '%E2%82',
    'ses_%C0%AF',
    '..%2F..%2Fetc%2Fpasswd',
    '%00',
    'ses_%00AAAAAAAAAAAAAAAAAAA',
    '%2F',
    'a%20b',
    '%F0%9F%92%A9',
    'null',
    '-1',
    '*',
    '%25',
    'ses_AAAAAAAAAAAAAAAAAAAA%0D%0ASet-Cookie:x',
    encodeURIComponent('é'.repeat(30)),
    '__proto__',
    'constructor',
    'exe_AAAAAAAAAAAAAAAAAAAA',
    ';',
    '.',
    '..',
    '%2e%2e',
    'ses_' + 'a'.repeat(20),
    'ses_' + 'a'.repeat(19) + '%C3%A9',
    'exe_' + 'Z'.repeat(20),
  ])
  return { value, crossTenant: false }
}

export function oddQuery(r: Rng, op: Operation): { parts: string[]; why: string } {
  const names = op.parameters.filter((p) => p.in === 'query').map((p) => p.name)
  const name = names.length ? r.pick(names) : 'limit'
  return r.pick([
    () => ({ parts: [`${name}=1`, `${name}=2`], why: 'duplicated parameter' }),
    () => ({ parts: [`${name}=5`, `${name}=5`], why: 'duplicated parameter, same value' }),
    () => ({ parts: [`${r.pick(['foo', 'LIMIT', 'limit ', 'x-y', ''])}=1`], why: 'unknown parameter' }),
    () => ({ parts: [r.pick(['__proto__=1', '__proto__[x]=1', 'constructor[prototype][x]=1', 'toString=1', 'hasOwnProperty=1'])], why: 'prototype key' }),
    () => ({ parts: [`${name}=`], why: 'empty value' }),
    () => ({ parts: [name], why: 'no value' }),
    () => ({
      parts: [`${name}=${r.pick(['1e2', '0x10', '%201', '1.5', '-0', '99999999999999999999', 'NaN', 'Infinity', 'true', '%FF', '%00', '1%00'])}`],
      why: 'odd value',
    }),
    () => ({ parts: [`${name}[]=1`], why: 'array syntax' }),
    () => ({ parts: [`${name}=${'c'.repeat(r.pick([100, 3000]))}`], why: 'long value' }),
    () => ({ parts: [r.pick(['&&&', '=', '=x', 'a=1;b=2', '%3D%3D=1', '?'])], why: 'odd separators' }),
    () => ({ parts: [`${percentEncodeOne(r, name)}=${r.pick(['1', '5', 'x'])}`], why: 'percent-encoded name' }),
  ])()
}

/** `name` with one of its characters percent-encoded, in upper or lower case (`limit` → `l%69mit`). */
function percentEncodeOne(r: Rng, name: string): string {
  if (!name) return '%5F'
  const at = r.int(0, name.length - 1)
  const hex = name.charCodeAt(at).toString(16).padStart(2, '0')
  return `${name.slice(0, at)}%${r.chance(0.5) ? hex.toUpperCase() : hex}${name.slice(at + 1)}`
}

export function oddHeaders(r: Rng, world: World, sid: string): { headers: Record<string, string>; why: string; kind: string; foreignResume?: boolean } {
  const known = world.sessions.find((s) => s.id === sid)
  return r.pick([
    () => ({
      headers: {
        accept: r.pick([
          'text/event-stream',
          '*/*',
          'text/*',
          'application/json',
          'application/problem+json',
          'text/html',
          'text/event-stream;q=0',
          'application/json, text/event-stream;q=0.1',
          'TEXT/EVENT-STREAM',
          '',
          ',,,;;;',
          'text/event-stream; charset=utf-8',
          'image/png',
          'application/*',
          '*/*;q=0',
        ]),
      },
      why: 'Accept',
      kind: 'Accept',
    }),
    () => {
      const id = r.pick([
        known?.eventIds.length ? r.pick(known.eventIds).id : '1-0',
        '0-0',
        '0',
        'garbage',
        '1-2-3',
        '99999999999999999999-0',
        '18446744073709551616-0',
        '1'.repeat(40) + '-0',
        ' 1-0',
        '1-0 ',
        'é',
        '',
        '9999999999999-0',
      ])
      // Any id the session's streams gave, or none of them: as a position in another stream it is foreign.
      return {
        headers: { 'last-event-id': id, accept: 'text/event-stream' },
        why: `Last-Event-ID ${JSON.stringify(id).slice(0, 30)}`,
        kind: 'Last-Event-ID',
        foreignResume: true,
      }
    },
    () => ({
      headers: r.pick([
        { 'x-forwarded-for': '1.2.3.4' },
        JSON.parse('{"__proto__": "x"}') as Record<string, string>,
        { constructor: 'x' },
        { 'content-type': 'application/json' },
        { 'x-big': 'v'.repeat(r.pick([1000, 8000])) },
        { cookie: 'a=b; __proto__=c' },
        { 'accept-version': '1.0.0' },
        { 'x-http-method-override': 'DELETE' },
        { 'accept-encoding': 'gzip, br, zstd' },
        { 'if-none-match': '*' },
        { range: 'bytes=0-1' },
      ]),
      why: 'other header',
      kind: 'other header',
    }),
  ])()
}

/** Authorization variants; for the events route also its ?access_token= (EventSource) form. */
export function oddAuthorization(
  r: Rng,
  world: World,
  tenant: Tenant,
  op: Operation,
  ids: Record<string, string>,
): { authorization: string | undefined; query?: string; url?: string; sid?: string; crossTenant?: boolean; why: string } {
  const key = world.keys[tenant]
  const other = world.keys[tenant === 'alpha' ? 'beta' : 'alpha']
  if (op.id === 'streamExecutionEvents' && world.tokens.length && r.chance(0.5)) {
    const t = r.pick(world.tokens)
    const url = `/v1/sessions/${t.sid}/executions/${t.eid}/events`
    return r.pick([
      () => ({ authorization: undefined, query: `access_token=${encodeURIComponent(t.token)}`, url, sid: t.sid, why: 'event token' }),
      () => ({ authorization: undefined, query: `access_token=${encodeURIComponent(t.token)}&access_token=x`, url, sid: t.sid, why: 'event token twice' }),
      () => ({ authorization: undefined, query: `access_token=${encodeURIComponent(t.token.slice(0, -2) + 'AA')}`, url, sid: t.sid, why: 'forged token' }),
      () => ({ authorization: undefined, query: `access_token=${encodeURIComponent(t.token)}`, sid: ids.id, why: 'token for another execution' }),
      () => ({ authorization: `Bearer ${other}`, query: `access_token=${encodeURIComponent(t.token)}`, url, sid: t.sid, why: 'token and another key' }),
      () => ({ authorization: undefined, query: `access_token=${r.pick(['', '.', 'a.b', '%FF', 'x'.repeat(5000)])}`, url, sid: t.sid, why: 'junk token' }),
    ])()
  }
  const v = r.pick([
    [undefined, 'none'],
    ['', 'empty'],
    ['Bearer', 'scheme only'],
    ['Bearer ', 'scheme and space'],
    ['Basic dGVzdDp0ZXN0', 'Basic'],
    [`Bearer ${key}x`, 'wrong key'],
    [`Bearer ${key} extra`, 'two tokens'],
    [`bearer ${key}`, 'lower-case scheme'],
    [`Bearer  ${key}`, 'two spaces'],
    [`Bearer\t${key}`, 'tab'],
    [`Bearer ${key} `, 'trailing space'],
    [`Bearer ${other}`, "another tenant's key"],
    [`Bearer ${'k'.repeat(5000)}`, 'long key'],
    [`Bearer ${key}\u00e4`, 'Latin-1 byte'],
    ['Token abc', 'other scheme'],
    ['Bearer null', 'null'],
    [`Bearer ${key},Bearer ${key}`, 'repeated'],
  ] as const)
  return { authorization: v[0], why: v[1] }
}

const UNROUTED_PATHS = [
  '/v1',
  '/v1/',
  '/v2/sessions',
  '/v1/sessions/x/y/z',
  '/openapi.json',
  '//v1/sessions',
  '/v1//sessions',
  '/V1/SESSIONS',
  '/healthz/',
  '/v1/sessions/a/executions/b/c/d',
  '/%2e%2e/etc/passwd',
  '/favicon.ico',
]

/** A path or method that no operation has: 404 not_found (or 400 for a malformed one). */
export function unroutedRequest(r: Rng, world: World): Partial {
  const known = world.sessions.find((s) => s.tenant === 'alpha')?.id ?? 'ses_AAAAAAAAAAAAAAAAAAAA'
  const [method, url] = r.pick<() => [string, string]>([
    () => [r.pick(['PUT', 'PATCH', 'OPTIONS']), `/v1/sessions/${known}`],
    () => [r.pick(['DELETE', 'PUT']), '/v1/sessions'],
    () => [r.pick(['GET', 'POST']), r.pick(UNROUTED_PATHS)],
    () => ['POST', '/healthz'],
    () => ['GET', `/v1/sessions/${known}/interrupt`],
    () => [r.pick(['PROPFIND', 'MKCOL', 'SEARCH']), '/v1/sessions'],
  ])()
  return {
    why: `no operation: ${method} ${url}`,
    method,
    url,
    headers: { authorization: `Bearer ${world.keys.alpha}` },
    validPerDoc: false,
    crossTenant: false,
  }
}

/**
 * A request target that is not a path (absolute form, asterisk form): refused with 400 whatever it
 * names, never followed (the host it names is nobody's: discard port 9, an invalid TLD). Or a path
 * with an odd Host header, which nothing may read as where to send the request.
 */
export function oddTarget(r: Rng, world: World): Partial & { mustRefuse: boolean } {
  const sid = world.sessions.find((s) => s.tenant === 'alpha')?.id ?? 'ses_AAAAAAAAAAAAAAAAAAAA'
  const auth = `Authorization: Bearer ${world.keys.alpha}\r\n`
  const [method, path, body] = r.pick<[string, string, string]>([
    ['GET', `/v1/sessions/${sid}/files`, ''],
    ['GET', `/v1/sessions/${sid}`, ''],
    ['POST', '/v1/sessions', '{}'],
    ['POST', `/v1/sessions/${sid}/executions`, '{"code":"1"}'],
    ['POST', '/mcp', `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute","arguments":{"session_id":"${sid}","code":"1"}}}`],
    ['GET', '/healthz', ''],
  ])
  const bodyHead = body ? `Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: ${body.length}\r\n` : ''
  const target = r.pick<[string, string, boolean]>([
    [`http://127.0.0.1:9${path}`, 'absolute form, a loopback port', true],
    [`http://replcast-fuzz.invalid${path}`, 'absolute form, another host', true],
    [`HTTP://127.0.0.1:9${path}`, 'absolute form, upper-case scheme', true],
    [`https://127.0.0.1:9${path}`, 'absolute form, https', true],
    [`http://user:pw@127.0.0.1:9${path}`, 'absolute form with credentials', true],
    ['*', 'asterisk form', true],
    [path, 'Host of another host', false],
    [path, 'Host with credentials', false],
    [path, 'empty Host', false],
    [path, 'two Hosts', false],
  ])
  const host =
    {
      'Host of another host': 'Host: replcast-fuzz.invalid:9\r\n',
      'Host with credentials': 'Host: user@127.0.0.1:9\r\n',
      'empty Host': 'Host:\r\n',
      'two Hosts': 'Host: a\r\nHost: b\r\n',
    }[target[1]] ?? 'Host: h\r\n'
  const text = `${method} ${target[0]} HTTP/1.1\r\n${host}${auth}${bodyHead}Connection: close\r\n\r\n${body}`
  return {
    why: `odd target: ${target[1]} (${method} ${target[0]})`,
    method: 'RAW',
    url: '',
    headers: {},
    raw: Buffer.from(text, 'latin1'),
    validPerDoc: false,
    crossTenant: false,
    mustRefuse: target[2],
  }
}

/** Bytes that are not a well-formed HTTP request: the parser's errors. */
export function rawRequest(r: Rng, world: World): Partial {
  const auth = `Authorization: Bearer ${world.keys.alpha}\r\n`
  const [why, text] = r.pick([
    ['header without colon', `GET /v1/sessions HTTP/1.1\r\nHost: h\r\n${auth}Bad Header\r\n\r\n`],
    [
      'bad chunk size',
      `POST /v1/sessions HTTP/1.1\r\nHost: h\r\n${auth}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`,
    ],
    [
      'two Content-Lengths',
      `POST /v1/sessions HTTP/1.1\r\nHost: h\r\n${auth}Content-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}`,
    ],
    ['Content-Length and chunked', `POST /v1/sessions HTTP/1.1\r\nHost: h\r\n${auth}Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`],
    ['unknown method', `FOO /v1/sessions HTTP/1.1\r\nHost: h\r\n${auth}\r\n`],
    ['bad version', `GET /v1/sessions HTTP/9.9\r\nHost: h\r\n${auth}\r\n`],
    ['control character in a header', `GET /v1/sessions HTTP/1.1\r\nHost: h\r\n${auth}X-A: a\u0001b\r\n\r\n`],
    ['space before colon', `GET /v1/sessions HTTP/1.1\r\nHost : h\r\n${auth}\r\n`],
    ['headers past the limit', `GET /v1/sessions HTTP/1.1\r\nHost: h\r\n${auth}X-A: ${'a'.repeat(20000)}\r\n\r\n`],
    ['bare LF', `GET /v1/sessions HTTP/1.1\nHost: h\n${auth.replace('\r\n', '\n')}\n`],
  ] as const)
  return { why: `malformed HTTP: ${why}`, method: 'RAW', url: '', headers: {}, raw: Buffer.from(text, 'latin1'), validPerDoc: false, crossTenant: false }
}
