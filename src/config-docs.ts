// The configuration table of docs/configuration.md, generated from the config schema (drift-tested).
// `npm run docs` rewrites the table between the markers in that page.
import { readFileSync, writeFileSync } from 'node:fs'
import { ConfigSchema } from './config.js'

export const TABLE_START = '<!-- config-table:start -->'
export const TABLE_END = '<!-- config-table:end -->'

export function configTable(): string {
  const rows = Object.entries(ConfigSchema.properties).map(([name, s]) => {
    const { default: def, description } = s as { default?: unknown; description?: string }
    return `| \`${name}\` | ${def === '' || def === undefined ? '(empty)' : `\`${typeof def === 'string' ? def : JSON.stringify(def)}\``} | ${description ?? ''} |`
  })
  return ['| variable | default | meaning |', '|---|---|---|', ...rows].join('\n')
}

export function withConfigTable(page: string): string {
  const a = page.indexOf(TABLE_START)
  const b = page.indexOf(TABLE_END)
  if (a < 0 || b < a) throw new Error('the page has no config-table markers')
  return `${page.slice(0, a + TABLE_START.length)}\n${configTable()}\n${page.slice(b)}`
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const path = process.argv[2] ?? 'docs/configuration.md'
  writeFileSync(path, withConfigTable(readFileSync(path, 'utf8')))
}
