// Lua scripts sent once per connection and run by their SHA1 after that (ioredis's defineCommand):
// the hot path does not send kilobytes of script text, nor make Redis hash it, on every call.
import type { ChainableCommander, Redis } from 'ioredis'

export interface LuaScript {
  name: string
  keys: number
  lua: string
}

type Callable = Record<string, (...args: unknown[]) => unknown>

export function luaScript(name: string, keys: number, lua: string): LuaScript {
  return { name: `replcast_${name}`, keys, lua }
}

function ensure(redis: Redis, s: LuaScript): void {
  if (typeof (redis as unknown as Callable)[s.name] !== 'function') redis.defineCommand(s.name, { numberOfKeys: s.keys, lua: s.lua })
}

/** Defines scripts on a connection, so that MULTIs made from it afterwards can queue them. */
export function defineScripts(redis: Redis, scripts: LuaScript[]): void {
  for (const s of scripts) ensure(redis, s)
}

/** Runs a script: KEYS first (`s.keys` of them), then ARGV. */
export async function runScript(redis: Redis, s: LuaScript, ...args: Array<string | number>): Promise<unknown> {
  ensure(redis, s)
  return (redis as unknown as Callable)[s.name]!(...args)
}

/** Queues a script in a MULTI or pipeline (made after defineScripts on its connection). */
export function queueScript(m: ChainableCommander, s: LuaScript, ...args: Array<string | number>): void {
  const fn = (m as unknown as Callable)[s.name]
  if (typeof fn !== 'function') throw new Error(`Lua script ${s.name} was not defined on this connection`)
  fn.apply(m, args)
}
