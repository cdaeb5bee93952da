// The app factory: builds a ready-to-listen Fastify instance with every resource injectable
// (tests pass their own Redis prefix, Docker labels, LLM endpoint) and closed in onClose.
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import { fastifySSE } from '@fastify/sse'
import fastifyWebsocket from '@fastify/websocket'
import { eventJson } from './event-json.js'
import type { Redis } from 'ioredis'
import type { Logger } from 'pino'
import { createLogger } from './http/logger.js'
import { randomUUID } from 'node:crypto'
import type { Config } from './config.js'
import { DockerSandboxDriver } from './sandbox/docker-driver.js'
import type { SandboxDriver } from './sandbox/driver.js'
import { createStores } from './store/stores.js'
import { connectRedis } from './store/redis-connect.js'
import { batchWritesPerTurn } from './store/turn-batching.js'
import { EventFeed } from './store/event-feed.js'
import { createSessionLayer } from './sessions/index.js'
import { createCluster } from './cluster/index.js'
import { installHolderRouting } from './http/holder-routing.js'
import { installMcpRouting } from './http/mcp-routing.js'
import { installPlacement } from './http/placement.js'
import { remoteCopies } from './http/remote-copies.js'
import { createMetrics } from './metrics.js'
import { authenticate, isAuthenticatedRoute } from './http/auth.js'
import { clientErrorHandler, frameworkErrorHandler, installProblemHandling } from './http/problem-handler.js'
import { installClosingAnswer } from './http/closing.js'
import { installRouteProblems } from './http/route-problems.js'
import { API_VERSION, installOpenApi } from './http/openapi-doc.js'
import { SseStreams } from './http/sse.js'
import { streamTokenSecret } from './http/stream-token.js'
import { parseQuery } from './http/query.js'
import { installOriginFormOnly } from './http/request-target.js'
import { sessionRoutes } from './http/routes/sessions.js'
import { snapshotRoutes } from './http/routes/snapshots.js'
import { executionRoutes } from './http/routes/executions.js'
import { oneShotRoutes } from './http/routes/one-shot.js'
import { fileRoutes } from './http/routes/files.js'
import { processRoutes } from './http/routes/processes.js'
import { opsRoutes } from './http/routes/ops.js'
import { messageRoutes } from './http/routes/messages.js'
import { mcpRoutes } from './http/routes/mcp.js'
import { playgroundRoutes } from './http/routes/playground.js'
import { ptyRoutes } from './http/routes/pty.js'
import { closeSockets, MAX_INPUT_FRAME_BYTES } from './http/pty-socket.js'
import { allowedModels, LlmService } from './agent/llm-service.js'
import { OpenAiLlmClient } from './agent/llm-client.js'
import { SubCalls } from './agent/sub-calls.js'
import { LlmBudget } from './agent/llm-budget.js'
import { RateLimiter } from './http/rate-limit.js'

export interface AppOptions {
  config: Config
  logger?: Logger
  redis?: Redis
  driver?: SandboxDriver
  /** false: no background work on ready (no adoption, reaper, event feed), e.g. to render openapi.yaml. */
  background?: boolean
  /** The clock of time windows (tenants' LLM budgets); tests pin it so a window does not end mid-test. */
  now?: () => number
}

/** Builds the app; `await app.ready()` (or listen) also re-adopts sessions and starts the reaper. */
export async function buildApp(opts: AppOptions): Promise<FastifyInstance> {
  const { config } = opts
  const log = opts.logger ?? createLogger(config.LOG_LEVEL)
  // A request fails fast (503 unavailable) while Redis is away; the connection keeps retrying.
  const redis = opts.redis ?? connectRedis(config, { lazyConnect: false, maxRetriesPerRequest: 1 })
  const blocking = redis.duplicate()
  batchWritesPerTurn(redis)
  for (const [name, conn] of [
    ['redis', redis],
    ['redis-blocking', blocking],
  ] as const) {
    conn.on('error', (err: Error) => log.warn({ err: { message: err.message }, connection: name }, 'redis connection error'))
  }
  const stores = createStores(redis, {
    prefix: config.REPLCAST_KEY_PREFIX,
    eventMaxLen: config.EVENT_LOG_MAXLEN,
    eventTtlS: config.EVENT_LOG_TTL_S,
    eventBytesLimit: (tenant) => config.tenantLimits.for(tenant).max_event_bytes,
  })
  const metrics = createMetrics()
  const feed = new EventFeed(stores, blocking, log.child({ component: 'event-feed' }), metrics.redisReadRetries)
  const driver = opts.driver ?? new DockerSandboxDriver(config.DOCKER_HOST, log.child({ component: 'docker' }), config.DOCKER_TIMEOUT_MS)
  // The agent's parts the sessions layer needs (answers to sandbox llm_query calls) come first;
  // the agent's turns, which run code through the sessions layer, come after it.
  const llmClient = config.OPENAI_BASE_URL ? new OpenAiLlmClient(config.OPENAI_BASE_URL, config.OPENAI_API_KEY, log.child({ component: 'openai' })) : null
  const models = allowedModels(config)
  const budget = new LlmBudget(redis, stores.keys, config.tenantLimits, log.child({ component: 'llm-budget' }), opts.now)
  const subCalls = new SubCalls(llmClient, models, config.REPLCAST_MODEL, log.child({ component: 'llm-subcalls' }), budget)
  const layer = createSessionLayer({ config, stores, feed, driver, log: log.child({ component: 'sessions' }), metrics, llmRequests: subCalls })
  const { sessions, executions } = layer
  const cluster = createCluster({ config, stores, log: log.child({ component: 'cluster' }), sessions: layer })
  // A fork's copies placed on other engines are woken (or deleted) there by a signed call to an instance on it.
  layer.snapshots.placeCopiesWith(remoteCopies(cluster, layer.engines))
  const llm = new LlmService({ config, executions, stores, log: log.child({ component: 'agent' }), llm: llmClient, subCalls, budget, allowedModels: models })
  const streams = new SseStreams()

  const app: FastifyInstance = Fastify({
    loggerInstance: log as unknown as FastifyBaseLogger,
    bodyLimit: config.BODY_LIMIT_BYTES,
    genReqId: () => `req_${randomUUID()}`,
    frameworkErrors: frameworkErrorHandler,
    clientErrorHandler,
    routerOptions: { querystringParser: parseQuery },
    // Requests that arrive while the instance closes get 503 problem+json instead (http/closing.ts).
    return503OnClosing: false,
  })
  installClosingAnswer(app)
  installProblemHandling(app)
  installRouteProblems(app)
  // The OpenAPI document's header and the component schemas the routes refer to (src/http/openapi-doc.ts).
  await installOpenApi(app)
  // Events' data as eventJson makes it: an output's text escaped once for Redis and every client (src/event-json.ts).
  await app.register(fastifySSE, { heartbeatInterval: config.SSE_HEARTBEAT_MS, serializer: eventJson })
  // WebSockets (a session's terminal, http/routes/pty.ts): frames no larger than a paste, no compression
  // (it would hold output in zlib's buffers); closing, a terminal's socket says why.
  await app.register(fastifyWebsocket, {
    options: { maxPayload: MAX_INPUT_FRAME_BYTES, perMessageDeflate: false },
    preClose: () => closeSockets(app.websocketServer.clients, 'the API instance is stopping; connect again'),
  })

  const rate = new RateLimiter(stores.quotas, (err) => log.warn({ err }, 'could not add request counts to Redis; retrying'), opts.now)
  const auth = authenticate(config, stores.leases, rate, (req) => cluster.isInternal(req.raw), opts.now)
  // Before anything reads the URL: a path, never a URL naming a host.
  installOriginFormOnly(app)
  // Decided on the matched route, never on the raw URL (absolute-form or percent-encoded paths).
  app.addHook('onRequest', async (req) => {
    if (isAuthenticatedRoute(req.routeOptions.url)) await auth(req)
  })
  // Routes that need the session's sandbox are answered by the instance holding it.
  installHolderRouting(app, cluster)
  installMcpRouting(app, cluster)
  // Creates go to the Docker engine with the most free capacity.
  installPlacement(app, cluster, layer.engines)
  app.addHook('onResponse', async (req, reply) => {
    metrics.httpSeconds.observe({ method: req.method, route: req.routeOptions.url ?? 'unknown', status: String(reply.statusCode) }, reply.elapsedTime / 1000)
  })

  await app.register(sessionRoutes, { sessions, executions, snapshots: layer.snapshots })
  await app.register(snapshotRoutes, { snapshots: layer.snapshots })
  await app.register(executionRoutes, { executions, streams, secret: streamTokenSecret(stores.leases) })
  await app.register(fileRoutes, { files: layer.files, maxDrainBytes: config.MAX_FILE_BYTES })
  await app.register(processRoutes, { processes: layer.processes, streams })
  await app.register(oneShotRoutes, { oneShots: layer.oneShots, executions, streams, templates: layer.templates })
  await app.register(messageRoutes, { executions, streams, llm })
  await app.register(mcpRoutes, {
    sessions,
    executions,
    files: layer.files,
    oneShots: layer.oneShots,
    processes: layer.processes,
    snapshots: layer.snapshots,
    version: API_VERSION,
  })
  await app.register(ptyRoutes, {
    terminals: layer.terminals,
    sessions,
    secret: streamTokenSecret(stores.leases),
    bufferBytes: config.TERMINAL_BUFFER_BYTES,
    pingMs: config.SSE_HEARTBEAT_MS,
  })
  await app.register(playgroundRoutes)
  await app.register(opsRoutes, { redis, driver, metrics, openapiYaml: () => app.swagger({ yaml: true }) })

  if (opts.background !== false) {
    app.addHook('onReady', async () => {
      await cluster.start()
      feed.start()
      await layer.start()
      cluster.run()
    })
    app.addHook('onListen', async () => {
      cluster.listening(app.server.address())
    })
    // Stopping: the sessions go to another instance at once (their sandboxes and executions go on).
    app.addHook('preClose', async () => {
      await cluster.handOver().catch((err: unknown) => log.warn({ err }, 'the hand-over of sessions failed; their leases lapse instead'))
    })
  }
  app.addHook('preClose', async () => {
    await streams.closeAll()
  })
  app.addHook('onClose', async () => {
    await rate.close()
    await cluster.close()
    await layer.close()
    await feed.stop()
    if (!opts.redis) {
      await redis.quit().catch(() => undefined)
      // Through Sentinel, quit leaves ioredis's failover-detector connections open (ioredis#1362): disconnect closes them.
      redis.disconnect()
    }
  })
  return app
}
