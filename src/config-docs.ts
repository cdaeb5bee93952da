// The README's configuration table, generated from the config schema (drift-tested).
// `npm run docs` rewrites the table between the markers in README.md.
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

export function withConfigTable(readme: string): string {
  const a = readme.indexOf(TABLE_START)
  const b = readme.indexOf(TABLE_END)
  if (a < 0 || b < a) throw new Error('README.md has no config-table markers')
  return `${readme.slice(0, a + TABLE_START.length)}\n${configTable()}\n${readme.slice(b)}`
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const path = process.argv[2] ?? 'README.md'
  writeFileSync(path, withConfigTable(readFileSync(path, 'utf8')))
}
