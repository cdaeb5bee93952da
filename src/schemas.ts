// The API's data shapes: one TypeBox schema each gives validation, the TypeScript type
// and the OpenAPI component (named by $id). Request schemas reject unknown fields.
import { Type, type Static, type TSchema } from 'typebox'

/** A $ref to a component schema (registered with app.addSchema), typed as the schema itself. */
export function ref<T extends TSchema & { $id?: string }>(schema: T) {
  return Type.Unsafe<Static<T>>({ $ref: `${schema.$id}#` })
}

const Id = (prefix: string, description: string) => Type.String({ pattern: `^${prefix}_[A-Za-z0-9]{20}$`, description })

export const SessionId = Id('ses', 'Session id')
export const ExecutionId = Id('exe', 'Execution id')
export const ProcessId = Id('prc', 'Process id')
export const SnapshotId = Id('snp', 'Snapshot id')

export const Runtime = Type.Union([Type.Literal('runc'), Type.Literal('runsc')], {
  $id: 'Runtime',
  description: 'Container runtime: runc (default Docker) or runsc (gVisor, stronger isolation)',
})

export const Limits = Type.Object(
  {
    memory_mb: Type.Integer({ minimum: 32, description: 'Memory limit in MiB (no swap)' }),
    cpus: Type.Number({ minimum: 0.05, description: 'CPU limit in cores' }),
    pids: Type.Integer({ minimum: 8, description: 'Process and thread limit' }),
    workspace_mb: Type.Integer({ minimum: 1, description: 'Size of the /workspace tmpfs in MiB (it counts against memory_mb)' }),
    output_bytes: Type.Integer({ minimum: 1024, description: 'Output bytes streamed per execution; more is dropped and counted in a limit event' }),
  },
  { $id: 'Limits', additionalProperties: false },
)

const LimitsRequest = Type.Partial(Limits, { additionalProperties: false })

// propertyNames repeats the key pattern: @fastify/swagger turns patternProperties into
// additionalProperties, so without it openapi.yaml would accept any key.
export const Metadata = Type.Record(Type.String({ pattern: '^.{1,64}$' }), Type.String({ maxLength: 1024 }), {
  propertyNames: { pattern: '^.{1,64}$' },
  maxProperties: 32,
  additionalProperties: false,
  description: 'Free-form string labels kept with the session',
})

/** Environment names a session may set: not PATH/HOME, nor PYTHON*, LD_*, MPL*, REPLCAST_* (they steer the REPL itself). */
const ENV_NAME = '^(?!(PATH|HOME)$)(?!PYTHON|LD_|MPL|REPLCAST_)[A-Za-z_][A-Za-z0-9_]{0,127}$'

/** A template name; whether it exists is the service's to say (400 unknown_template, not a schema error). */
const TemplateName = Type.String({ minLength: 1, maxLength: 64, description: 'Sandbox template (GET /v1/templates lists them); default "default"' })

const SessionStatus = Type.Union([Type.Literal('starting'), Type.Literal('ready'), Type.Literal('busy'), Type.Literal('hibernated'), Type.Literal('dead')])

export const IdleAction = Type.Union([Type.Literal('delete'), Type.Literal('hibernate')], {
  $id: 'IdleAction',
  description: 'At the idle deadline: delete the session, or hibernate it (runsc sessions; its state is kept on disk until hibernated_ttl_s passes)',
})

export const CreateSessionBody = Type.Object(
  {
    idle_timeout_s: Type.Optional(Type.Integer({ minimum: 1, description: 'Idle seconds before the session is reaped' })),
    idle_action: Type.Optional(ref(IdleAction)),
    hibernated_ttl_s: Type.Optional(Type.Integer({ minimum: 1, description: 'Seconds a hibernated session is kept before it is deleted with its checkpoint' })),
    runtime: Type.Optional(ref(Runtime)),
    limits: Type.Optional(LimitsRequest),
    env: Type.Optional(
      Type.Record(Type.String({ pattern: ENV_NAME }), Type.String({ maxLength: 4096 }), {
        propertyNames: { pattern: ENV_NAME },
        maxProperties: 64,
        additionalProperties: false,
        description: 'Environment variables for the REPL process (names that steer Python, the loader or replcast itself, and PATH/HOME, are refused)',
      }),
    ),
    metadata: Type.Optional(Metadata),
    template: Type.Optional(TemplateName),
    snapshot_id: Type.Optional({
      ...SnapshotId,
      description:
        "Start from this snapshot: the new session's state is the snapshot's (its runtime, template, limits and env are the snapshot's, so those fields may not be given with it)",
    }),
  },
  { $id: 'CreateSessionRequest', additionalProperties: false },
)

export const Session = Type.Object(
  {
    id: SessionId,
    status: SessionStatus,
    created_at: Type.String({ format: 'date-time' }),
    last_active_at: Type.String({ format: 'date-time' }),
    expires_at: Type.String({
      format: 'date-time',
      description: 'When the session is reaped (or hibernated, with idle_action "hibernate") unless used again; for a hibernated session, when it is deleted',
    }),
    idle_timeout_s: Type.Integer(),
    idle_action: ref(IdleAction),
    hibernated_ttl_s: Type.Integer({ description: 'Seconds it stays hibernated before it is deleted with its checkpoint' }),
    hibernated_at: Type.Optional(Type.String({ format: 'date-time', description: 'When it was hibernated (only while it is)' })),
    runtime: ref(Runtime),
    limits: ref(Limits),
    metadata: Metadata,
    execution_count: Type.Integer({ description: 'Executions run so far' }),
    template: Type.String({ description: 'The sandbox template it was started from' }),
    status_detail: Type.Optional(Type.String({ description: 'Why a dead session is dead, when there is more to say than that its sandbox stopped' })),
  },
  { $id: 'Session', additionalProperties: false },
)

export const SessionList = Type.Object(
  {
    sessions: Type.Array(ref(Session)),
    next_cursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass as ?cursor= for the next page; null at the end' }),
  },
  { $id: 'SessionList' },
)

export const ExecuteBody = Type.Object(
  {
    code: Type.String({ maxLength: 1_000_000, description: 'Python source, run like a notebook cell' }),
    timeout_s: Type.Optional(Type.Number({ exclusiveMinimum: 0, description: 'Wall-clock limit; on expiry the code is interrupted, then the sandbox killed' })),
    language: Type.Optional(
      Type.Union([Type.Literal('python'), Type.Literal('bash')], {
        description:
          "python (default): a cell in the session's namespace. bash: a bash script run as a child process in /workspace; its done event carries exit_code, and the Python namespace is untouched",
      }),
    ),
  },
  { $id: 'ExecuteRequest', additionalProperties: false },
)

const BASE64 = '^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$'

/** POST /v1/execute: code in a fresh sandbox, destroyed after it ends (ExecuteRequest plus the sandbox's shape and input files). */
export const OneShotBody = Type.Object(
  {
    code: ExecuteBody.properties.code,
    timeout_s: ExecuteBody.properties.timeout_s,
    language: ExecuteBody.properties.language,
    files: Type.Optional(
      Type.Array(
        Type.Object(
          {
            path: Type.String({ minLength: 1, maxLength: 4096, description: 'Relative to /workspace; parent folders are created' }),
            content_base64: Type.String({ pattern: BASE64, description: "The file's bytes, base64" }),
          },
          { additionalProperties: false },
        ),
        { maxItems: 1000, description: 'Files written into /workspace before the code runs' },
      ),
    ),
    runtime: Type.Optional(ref(Runtime)),
    limits: Type.Optional(LimitsRequest),
    template: Type.Optional(TemplateName),
  },
  { $id: 'OneShotRequest', additionalProperties: false },
)

export const TemplateList = Type.Object(
  {
    templates: Type.Array(
      Type.Object(
        {
          name: Type.String(),
          image: Type.String({ description: 'The Docker image its sandboxes run' }),
          default: Type.Boolean({ description: 'The template of a request that names none' }),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { $id: 'TemplateList', additionalProperties: false },
)

const L = Type.Literal
export const DoneStatus = Type.Union([L('ok'), L('error'), L('interrupted'), L('timeout'), L('killed'), L('oom')], {
  $id: 'DoneStatus',
  description: 'How an execution ended',
})
export const ExecutionStatus = Type.Union([L('queued'), L('running'), L('ok'), L('error'), L('interrupted'), L('timeout'), L('killed'), L('oom')], {
  $id: 'ExecutionStatus',
})
export const EventType = Type.Union(
  [L('status'), L('stdout'), L('stderr'), L('result'), L('display'), L('error'), L('limit'), L('code'), L('llm_call'), L('final'), L('done'), L('exit')],
  { $id: 'EventType', description: "SSE event name (exit: the last event of a background process's output)" },
)

const MimeBundle = Type.Record(Type.String(), Type.Unknown(), { description: 'MIME type → content (image/png is base64)' })

/** Every event of an execution: `type` is the SSE event name, `id` the resumable position. */
export const Event = Type.Object(
  {
    id: Type.String({ description: "Position in the execution's event log (SSE id)" }),
    type: ref(EventType),
    state: Type.Optional(Type.String()),
    execution_id: Type.Optional(Type.String()),
    text: Type.Optional(
      Type.String({
        description:
          'stdout/stderr: the text. An event is not a line: lines written in a burst share one, and a line may come in pieces (one not ended 20 ms after it began is shown as it stands); join the texts',
      }),
    ),
    execution_count: Type.Optional(Type.Integer()),
    data: Type.Optional(MimeBundle),
    metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    ename: Type.Optional(Type.String()),
    evalue: Type.Optional(Type.String()),
    traceback: Type.Optional(Type.Array(Type.String())),
    what: Type.Optional(Type.String()),
    dropped_bytes: Type.Optional(Type.Integer()),
    delta: Type.Optional(Type.String()),
    prompts: Type.Optional(Type.Integer()),
    model: Type.Optional(Type.String()),
    value: Type.Optional(Type.String()),
    status: Type.Optional(ref(DoneStatus)),
    step: Type.Optional(
      Type.Integer({ minimum: 1, description: 'LLM turns: the model step (agent mode) or attempt (stream mode self-correction) the event belongs to' }),
    ),
    duration_ms: Type.Optional(Type.Number()),
    exit_code: Type.Optional(
      Type.Union([Type.Integer(), Type.Null()], {
        description:
          'done of a bash execution, or exit of a background process: its exit status (128 + N when signal N ended it); null when the sandbox died (or the session was restarted) first',
      }),
    ),
  },
  { $id: 'Event', description: 'One event; fields present depend on type (see the event table in docs/api.md)' },
)

export const Execution = Type.Object(
  {
    id: ExecutionId,
    session_id: SessionId,
    status: ref(ExecutionStatus),
    created_at: Type.String({ format: 'date-time' }),
    started_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    ended_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    duration_ms: Type.Union([Type.Number(), Type.Null()]),
    execution_count: Type.Union([Type.Integer(), Type.Null()]),
    events: Type.Array(ref(Event)),
  },
  { $id: 'Execution' },
)

/** Environment names a background process may be given. */
const PROCESS_ENV_NAME = '^[A-Za-z_][A-Za-z0-9_]{0,127}$'

export const StartProcessBody = Type.Object(
  {
    command: Type.String({ minLength: 1, maxLength: 65536, description: 'Run with bash -c in the sandbox, in its own process group' }),
    cwd: Type.Optional(
      Type.String({ maxLength: 4096, description: 'Its working directory: relative to /workspace, or absolute (default /workspace); it must exist' }),
    ),
    env: Type.Optional(
      Type.Record(Type.String({ pattern: PROCESS_ENV_NAME }), Type.String({ maxLength: 4096 }), {
        propertyNames: { pattern: PROCESS_ENV_NAME },
        maxProperties: 64,
        additionalProperties: false,
        description: "Environment variables added to the sandbox's own",
      }),
    ),
  },
  { $id: 'StartProcessRequest', additionalProperties: false },
)

export const Process = Type.Object(
  {
    id: ProcessId,
    session_id: SessionId,
    command: Type.String(),
    cwd: Type.String({ description: 'As the request gave it ("" for /workspace)' }),
    status: Type.Union([L('running'), L('exited')]),
    exit_code: Type.Union([Type.Integer(), Type.Null()], {
      description:
        'Its exit status once exited (128 + N when signal N ended it); null while it runs, or when it ended with its sandbox (the session restarted, or the sandbox died)',
    }),
    started_at: Type.String({ format: 'date-time' }),
    ended_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  },
  { $id: 'Process', additionalProperties: false },
)

export const ProcessList = Type.Object(
  { processes: Type.Array(ref(Process), { description: 'Oldest first: the running ones, and those that exited within EVENT_LOG_TTL_S (at most 100)' }) },
  { $id: 'ProcessList', additionalProperties: false },
)

/** The signals a process may be sent (to its whole process group). */
export const SignalName = Type.Union(
  [L('HUP'), L('INT'), L('QUIT'), L('KILL'), L('USR1'), L('USR2'), L('TERM'), L('CONT'), L('STOP'), L('TSTP'), L('WINCH'), L('ALRM')],
  { description: "Sent to the process's process group (bash and what it started)" },
)

export const SignalBody = Type.Object({ signal: SignalName }, { $id: 'SignalRequest', additionalProperties: false })

export const Problem = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    code: Type.String({ description: 'Stable machine-readable error code' }),
  },
  { $id: 'Problem', additionalProperties: true },
)

/** One file or folder of a session's /workspace. */
export const FileEntry = Type.Object(
  {
    path: Type.String({ description: 'Relative to /workspace (data/blob.bin); where it really is when reached through a symbolic link' }),
    type: Type.Union([Type.Literal('file'), Type.Literal('dir')]),
    size: Type.Integer({ minimum: 0, description: 'Bytes; 0 for a folder' }),
    modified_at: Type.String({ format: 'date-time' }),
  },
  { $id: 'FileEntry', additionalProperties: false },
)

export const FileList = Type.Object(
  {
    files: Type.Array(ref(FileEntry), { description: 'Sorted by path; symbolic links and special files are not listed' }),
    truncated: Type.Boolean({ description: 'True when the folder held more than the 10,000 entries listed' }),
  },
  { $id: 'FileList', additionalProperties: false },
)

export type SessionT = Static<typeof Session>
export type LimitsT = Static<typeof Limits>
export type CreateSessionBodyT = Static<typeof CreateSessionBody>
export type OneShotBodyT = Static<typeof OneShotBody>
export type ExecutionT = Static<typeof Execution>
export type DoneStatusT = Static<typeof DoneStatus>
export type ProcessT = Static<typeof Process>
export type StartProcessBodyT = Static<typeof StartProcessBody>
export type SignalT = Static<typeof SignalName>
