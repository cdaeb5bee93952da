// The Docker create config of a sandbox: the whole security baseline, always (docs/security.md).
import type { ContainerCreateOptions } from 'dockerode'
import { MAX_FRAME_BYTES, MAX_PROMPT_CHARS } from '../repl/protocol.js'
import { pooledLabels, sandboxLabels } from './labels.js'

export interface SandboxSpec {
  sessionId: string
  tenant: string
  instance: string
  deployment: string
  image: string
  runtime: 'runc' | 'runsc'
  user: string
  memoryMb: number
  cpus: number
  pids: number
  workspaceMb: number
  tmpMb: number
  nofile: number
  maxStreamBytes: number
  maxImageBytes: number
  env: Record<string, string>
  /** A warm-pool sandbox: labelled without session or tenant (`sessionId` is then its pool id, for the name). */
  pooled?: boolean
}

/**
 * Under gVisor the pids cgroup counts the sandbox kernel's (the Sentry's) host threads, several
 * per guest task, and the Sentry dies when it cannot make one: `pids` then becomes the guest's
 * RLIMIT_NPROC (enforced per sandbox by gVisor's own kernel, so fork() fails with EAGAIN as under
 * runc) and the cgroup gets a host-thread budget large enough for that many tasks.
 * Under runc RLIMIT_NPROC would count uid 1000's processes across every sandbox, so it is not set.
 */
const RUNSC_HOST_THREADS_PER_TASK = 16
const RUNSC_HOST_THREADS_BASE = 256

/** The most a process can have: the kernel OOM killer picks sandboxes first. */
const SANDBOX_OOM_SCORE_ADJ = 1000

export function hostPidsLimit(runtime: 'runc' | 'runsc', pids: number): number {
  return runtime === 'runsc' ? pids * RUNSC_HOST_THREADS_PER_TASK + RUNSC_HOST_THREADS_BASE : pids
}

export function containerName(sessionId: string): string {
  return `replcast-${sessionId}`
}

export function containerConfig(s: SandboxSpec): ContainerCreateOptions {
  const [uid = '1000', gid = uid] = s.user.split(':')
  const env = Object.entries(s.env).map(([k, v]) => `${k}=${v}`)
  // The sizes both sides of the REPL protocol must agree on have their one source here; the
  // REPL reads them at start and reports what it uses in its `ready` frame (`limits`).
  env.push(
    `REPLCAST_MAX_FRAME_BYTES=${MAX_FRAME_BYTES}`,
    `REPLCAST_MAX_PROMPT_CHARS=${MAX_PROMPT_CHARS}`,
    `REPLCAST_MAX_STREAM_BYTES=${s.maxStreamBytes}`,
    `REPLCAST_MAX_IMAGE_BYTES=${s.maxImageBytes}`,
  )
  return {
    name: containerName(s.sessionId),
    Image: s.image,
    User: s.user,
    WorkingDir: '/workspace',
    Env: env,
    Labels: s.pooled
      ? pooledLabels(s.deployment, s.instance, s.memoryMb * 1024 * 1024)
      : sandboxLabels(s.deployment, s.sessionId, s.tenant, s.instance, s.memoryMb * 1024 * 1024),
    OpenStdin: true,
    StdinOnce: false,
    Tty: false,
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    NetworkDisabled: true,
    HostConfig: {
      NetworkMode: 'none',
      Runtime: s.runtime,
      ReadonlyRootfs: true,
      Tmpfs: {
        '/workspace': `rw,nosuid,nodev,size=${s.workspaceMb}m,uid=${uid},gid=${gid},mode=0700`,
        '/tmp': `rw,nosuid,nodev,noexec,size=${s.tmpMb}m,mode=1777`,
      },
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      PidsLimit: hostPidsLimit(s.runtime, s.pids),
      Memory: s.memoryMb * 1024 * 1024,
      MemorySwap: s.memoryMb * 1024 * 1024,
      NanoCpus: Math.round(s.cpus * 1e9),
      // No core dumps: a crashing process must not write its memory to the tmpfs (or the host's core pattern).
      Ulimits: [
        { Name: 'nofile', Soft: s.nofile, Hard: s.nofile },
        { Name: 'core', Soft: 0, Hard: 0 },
        ...(s.runtime === 'runsc' ? [{ Name: 'nproc', Soft: s.pids, Hard: s.pids }] : []),
      ],
      // When the host runs short of memory the kernel kills a sandbox before Redis, dockerd or the API.
      OomScoreAdj: SANDBOX_OOM_SCORE_ADJ,
      Init: true,
      IpcMode: 'private',
      // /dev/shm is a third writable tmpfs (POSIX shared memory, multiprocessing's semaphores);
      // Docker's default is 64 MiB whatever the limits, so it gets /tmp's cap.
      ShmSize: s.tmpMb * 1024 * 1024,
      LogConfig: { Type: 'local', Config: { 'max-size': '2m', 'max-file': '1', compress: 'false' } },
      RestartPolicy: { Name: 'no' },
    },
  }
}
