// Operations: liveness, readiness (Redis and Docker reachable), Prometheus metrics, the API document.
import type { FastifyInstance } from 'fastify'
import { Type } from 'typebox'
import type { Redis } from 'ioredis'
import type { SandboxDriver } from '../../sandbox/driver.js'
import type { Metrics } from '../../metrics.js'

export async function opsRoutes(
  app: FastifyInstance,
  deps: { redis: Redis; driver: SandboxDriver; metrics: Metrics; openapiYaml: () => string },
): Promise<void> {
  const tags = ['operations']
  const security: Array<Record<string, string[]>> = [] // open: for probes and scrapers
  const Health = Type.Object({ status: Type.String(), checks: Type.Optional(Type.Record(Type.String(), Type.String())) })

  app.get(
    '/healthz',
    { schema: { operationId: 'healthz', summary: 'The process is up', tags, security, response: { 200: { ...Health, description: 'Up' } } } },
    async () => ({ status: 'ok' }),
  )

  app.get(
    '/readyz',
    {
      schema: {
        operationId: 'readyz',
        summary: 'Redis and the Docker engine are reachable',
        tags,
        security,
        response: { 200: { ...Health, description: 'Ready' }, 503: { ...Health, description: 'Not ready' } },
      },
    },
    async (_req, reply) => {
      const checks: Record<string, string> = {}
      const check = async (name: string, fn: () => Promise<unknown>) => {
        try {
          await withTimeout(fn(), 2000)
          checks[name] = 'ok'
        } catch (err) {
          checks[name] = (err as Error).message || 'failed'
        }
      }
      await Promise.all([check('redis', () => deps.redis.ping()), check('docker', () => deps.driver.ping())])
      const ok = Object.values(checks).every((v) => v === 'ok')
      reply.code(ok ? 200 : 503)
      return { status: ok ? 'ok' : 'unavailable', checks }
    },
  )

  app.get(
    '/metrics',
    {
      schema: {
        operationId: 'metrics',
        summary: 'Prometheus metrics',
        tags,
        security,
        response: { 200: { description: 'Prometheus text format', content: { 'text/plain': { schema: { type: 'string' } } } } },
      },
    },
    async (_req, reply) => {
      reply.type(deps.metrics.registry.contentType)
      return deps.metrics.registry.metrics()
    },
  )

  app.get(
    '/openapi.yaml',
    {
      schema: {
        operationId: 'openapi',
        summary: "This API's OpenAPI 3.1 document",
        tags,
        security,
        response: { 200: { description: 'OpenAPI YAML', content: { 'application/yaml': { schema: { type: 'string' } } } } },
      },
    },
    async (_req, reply) => {
      reply.type('application/yaml')
      return deps.openapiYaml()
    },
  )
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms)
    p.then(
      (v) => {
        clearTimeout(t)
        resolve(v)
      },
      (e: unknown) => {
        clearTimeout(t)
        reject(e instanceof Error ? e : new Error(String(e)))
      },
    )
  })
}
