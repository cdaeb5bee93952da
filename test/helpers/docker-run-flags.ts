// `docker run` flags for a sandbox's create config, so tests that start the image by hand start it
// exactly as the service does. A config key this file does not know throws: a new setting in
// containerConfig() must be mapped here (or named as deliberately left out) before tests pass.
import type { ContainerCreateOptions, HostConfig } from 'dockerode'

type Mapper<T> = (value: NonNullable<T>) => string[]

// Left out on purpose: the name and labels (tests must not look like the service's sandboxes to its
// orphan sweep), the image (the caller appends it) and the attach fields (`-i` covers them).
const TOP: { [K in keyof ContainerCreateOptions]?: Mapper<ContainerCreateOptions[K]> } = {
  name: () => [],
  Labels: () => [],
  Image: () => [],
  AttachStdin: () => [],
  AttachStdout: () => [],
  AttachStderr: () => [],
  StdinOnce: () => [],
  OpenStdin: (v) => (v ? ['--interactive'] : []),
  Tty: (v) => (v ? ['--tty'] : []),
  User: (v) => ['--user', v],
  WorkingDir: (v) => ['--workdir', v],
  Env: (v) => v.flatMap((e) => ['--env', e]),
  NetworkDisabled: (v) => (v ? ['--network', 'none'] : []),
}

const HOST: { [K in keyof HostConfig]?: Mapper<HostConfig[K]> } = {
  NetworkMode: () => [], // NetworkDisabled above
  Runtime: (v) => ['--runtime', v],
  ReadonlyRootfs: (v) => (v ? ['--read-only'] : []),
  Tmpfs: (v) => Object.entries(v).flatMap(([dir, opts]) => ['--tmpfs', `${dir}:${opts}`]),
  CapDrop: (v) => (v as string[]).flatMap((c) => ['--cap-drop', c]),
  SecurityOpt: (v) => (v as string[]).flatMap((o) => ['--security-opt', o]),
  PidsLimit: (v) => ['--pids-limit', String(v)],
  Memory: (v) => ['--memory', String(v)],
  MemorySwap: (v) => ['--memory-swap', String(v)],
  NanoCpus: (v) => ['--cpus', String(v / 1e9)],
  Ulimits: (v) => v.flatMap((u) => ['--ulimit', `${u.Name}=${u.Soft}:${u.Hard}`]),
  Init: (v) => (v ? ['--init'] : []),
  IpcMode: (v) => ['--ipc', v],
  ShmSize: (v) => ['--shm-size', String(v)],
  LogConfig: (v) => ['--log-driver', v.Type, ...Object.entries(v.Config).flatMap(([k, val]) => ['--log-opt', `${k}=${String(val)}`])],
  RestartPolicy: (v) => ['--restart', v.Name ?? 'no'],
  OomScoreAdj: (v) => ['--oom-score-adj', String(v)],
}

function mapAll<O extends object>(what: string, object: O, mappers: { [K in keyof O]?: Mapper<O[K]> }): string[] {
  return Object.entries(object).flatMap(([key, value]) => {
    if (value === undefined) return []
    const map = mappers[key as keyof O]
    if (!map) throw new Error(`${what}.${key} has no docker run flag in test/helpers/docker-run-flags.ts: map it there`)
    return map(value as NonNullable<O[keyof O]>)
  })
}

export function dockerRunFlags(config: ContainerCreateOptions): string[] {
  const { HostConfig: host, ...top } = config
  return [...mapAll('config', top, TOP), ...(host ? mapAll('HostConfig', host, HOST) : [])]
}
