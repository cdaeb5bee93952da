// Sandbox templates: the images a session may be started from, by name. SANDBOX_TEMPLATES names
// them (`name=image,...`); the template "default" is always SANDBOX_IMAGE. Parsed once at start.

export const DEFAULT_TEMPLATE = 'default'

const NAME = /^[a-z0-9][a-z0-9_.-]{0,63}$/

export class TemplatesError extends Error {
  override name = 'TemplatesError'
}

/** name → image, "default" first. Throws TemplatesError naming the bad entry. */
export function parseTemplates(spec: string, defaultImage: string): ReadonlyMap<string, string> {
  const out = new Map<string, string>([[DEFAULT_TEMPLATE, defaultImage]])
  for (const entry of spec
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)) {
    const eq = entry.indexOf('=')
    const name = entry.slice(0, eq).trim()
    const image = entry.slice(eq + 1).trim()
    if (eq <= 0 || !image || /\s/.test(image) || !NAME.test(name))
      throw new TemplatesError(`invalid SANDBOX_TEMPLATES entry ${JSON.stringify(entry)}: expected name=image (name: a-z, 0-9, _ . -)`)
    if (name === DEFAULT_TEMPLATE) throw new TemplatesError('SANDBOX_TEMPLATES cannot name "default": it is SANDBOX_IMAGE')
    if (out.has(name)) throw new TemplatesError(`SANDBOX_TEMPLATES names ${name} twice`)
    out.set(name, image)
  }
  return out
}
