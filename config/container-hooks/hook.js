// Gantry's wrapper of GitHub's Kubernetes container hook (actions/runner-container-hooks
// v0.8.1, packages/k8s; the official runner image's /home/runner/k8s-novolume/index.js).
//
// The runner runs this file with its own node for every hook command, as it runs any hook
// named by ACTIONS_RUNNER_CONTAINER_HOOKS (actions/runner ContainerHookManager). It runs
// the hook named by GANTRY_CONTAINER_HOOK, unchanged, with the runner's input, changed
// only as below. It calls no API server itself and writes nothing to the cluster.
//
//   command             change                                          why
//   prepare_job         a port "HOST:CONTAINER[/proto]" of the job       the hook turns HOST into a hostPort, which
//                       container or a service becomes                   Pod Security baseline refuses and which
//                       "CONTAINER[/proto]"                              keeps two such jobs off one node; in the
//                                                                        workflow pod every service is reached at
//                                                                        its container port anyway
//   prepare_job         the workflow pod gets hostAliases: 127.0.0.1     services share the workflow pod's network;
//                       for each service's container name (the image's   the runner does not tell the hook a
//                       last path element without its tag, as the hook   service's key (its HookContainer has no
//                       names it) and its key when the input carries it  name), so the hook's own name is the one
//                       (contextName), when a valid DNS name             known
//   prepare_job         the response's ports of each service map each    ${{ job.services.<id>.ports['5432'] }} is
//                       declared container port to itself                where the job reaches it
//   prepare_job failed  the hook's cleanup_job is run at once            a registry Secret the hook made before a
//                                                                        refused pod would stay until the runner's
//                                                                        own cleanup_job
//   run_container_step  a Dockerfile action, or an image action          the hook refuses both with messages that
//                       without an entrypoint, fails at once with a      name neither the action nor a way out
//                       message naming the action and the way out
//   anything else       passed on unchanged
//
// The template change is made in a copy of the template (ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE,
// JSON: Gantry writes it so) given to prepare_job alone: step pods have no services.
'use strict'

const fs = require('fs')
const os = require('os')
const path = require('path')
const { spawnSync } = require('child_process')

const LOOPBACK = '127.0.0.1'
const DNS_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/

// withoutHostPort is a port mapping without its host port: "5432:5432/tcp" → "5432/tcp".
// Mappings the hook would refuse anyway (more than one ':') are left for it to refuse.
function withoutHostPort(mapping) {
  const m = String(mapping)
  const slash = m.indexOf('/')
  const ports = slash < 0 ? m : m.slice(0, slash)
  const proto = slash < 0 ? undefined : m.slice(slash + 1)
  const parts = ports.split(':')
  if (parts.length !== 2) {
    return mapping
  }
  return proto === undefined ? parts[1] : `${parts[1]}/${proto}`
}

// containerPortOf is the container port of a mapping ("5432:5432/tcp" → "5432").
function containerPortOf(mapping) {
  const parts = String(mapping).split('/')[0].split(':')
  return parts[parts.length - 1]
}

// containerName is the name the hook gives a service's container (generateContainerName).
function containerName(image) {
  return String(image || '').split('/').pop().split(':')[0]
}

// serviceHostnames are the names a service is reached at, lower-cased, valid DNS names only.
function serviceHostnames(services) {
  const names = []
  for (const s of services) {
    for (const n of [s.contextName, containerName(s.image)]) {
      const name = String(n || '').toLowerCase()
      if (!name) {
        continue
      }
      if (!DNS_NAME.test(name) || name.length > 253) {
        process.stdout.write(`::warning::Service ${n} is reached at localhost only: its name is not a DNS name\n`)
        continue
      }
      if (!names.includes(name)) {
        names.push(name)
      }
    }
  }
  return names
}

// runHook runs GitHub's hook with input on its stdin and env as its environment.
function runHook(input, env) {
  const hook = process.env.GANTRY_CONTAINER_HOOK
  const res = spawnSync(process.execPath, [hook], {
    input: JSON.stringify(input) + '\n',
    stdio: ['pipe', 'inherit', 'inherit'],
    env
  })
  if (res.error) {
    process.stdout.write(`::error::Gantry could not run the container hook ${hook}: ${res.error.message}\n`)
    return 1
  }
  return res.status === null ? 1 : res.status
}

// prepareJob is prepare_job with the changes of the table above.
function prepareJob(input) {
  const args = input.args || {}
  const declared = []
  for (const c of [args.container, ...(args.services || [])]) {
    if (c && Array.isArray(c.portMappings)) {
      c.portMappings = c.portMappings.map(withoutHostPort)
    }
  }
  for (const s of args.services || []) {
    declared.push((s.portMappings || []).map(containerPortOf))
  }
  const env = { ...process.env }
  let dir
  const templateFile = process.env.ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE
  const hostnames = serviceHostnames(args.services || [])
  let template = {}
  if (hostnames.length > 0 && templateFile) {
    try {
      template = JSON.parse(fs.readFileSync(templateFile, 'utf8')) || {}
    } catch (e) {
      process.stdout.write(`::warning::Services are reached at localhost only: the hook template ${templateFile} is not JSON (${e.message})\n`)
      template = null
    }
  }
  if (hostnames.length > 0 && template) {
    template.spec = template.spec || {}
    template.spec.hostAliases = (template.spec.hostAliases || []).concat([{ ip: LOOPBACK, hostnames }])
    dir = fs.mkdtempSync(path.join(process.env.RUNNER_TEMP || os.tmpdir(), 'gantry-hook-'))
    env.ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE = path.join(dir, 'workflow-pod.json')
    fs.writeFileSync(env.ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE, JSON.stringify(template))
  }
  let code
  try {
    code = runHook(input, env)
  } finally {
    if (dir) {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
  if (code !== 0) {
    // What the hook made before it failed (a registry Secret, before a refused pod) goes now.
    const cleanup = { command: 'cleanup_job', responseFile: input.responseFile, args: {}, state: {} }
    if (runHook(cleanup, process.env) !== 0) {
      process.stdout.write('::warning::Gantry could not clean up after the failed prepare_job: the runner cleans up when it ends\n')
    }
    return code
  }
  rewritePorts(input.responseFile, declared)
  return 0
}

// rewritePorts maps, in the response file, each service's declared container ports to
// themselves (the hook writes only ports that have a hostPort). The runner reads the
// services by position (ContainerHookManager.UpdateJobContext).
function rewritePorts(responseFile, declared) {
  if (!responseFile || !declared.some(d => d.length > 0) || !fs.existsSync(responseFile)) {
    return
  }
  const lines = fs.readFileSync(responseFile, 'utf8').split('\n').filter(l => l.trim() !== '')
  if (lines.length === 0) {
    return
  }
  const response = JSON.parse(lines[lines.length - 1])
  const services = (response.context && response.context.services) || []
  if (services.length !== declared.length) {
    return
  }
  services.forEach((s, i) => {
    s.ports = s.ports || {}
    for (const p of declared[i]) {
      s.ports[p] = p
    }
  })
  fs.writeFileSync(responseFile, JSON.stringify(response) + os.EOL)
}

// actionOf names the action of a Dockerfile under the runner's _actions directory
// (…/_actions/OWNER/REPO/REF[/PATH]/Dockerfile → OWNER/REPO[/PATH]@REF), else the path.
function actionOf(dockerfile) {
  const m = /\/_actions\/([^/]+)\/([^/]+)\/([^/]+)\/(?:(.*)\/)?[^/]+$/.exec(dockerfile)
  if (!m) {
    return dockerfile
  }
  return `${m[1]}/${m[2]}${m[4] ? '/' + m[4] : ''}@${m[3]}`
}

// refusedStep is why run_container_step cannot run the step, '' when it can.
function refusedStep(args) {
  if (args.dockerfile) {
    return `The action ${actionOf(args.dockerfile)} of this step is a Dockerfile action (${args.dockerfile}): ` +
      "pools in Kubernetes mode cannot build images (GitHub's container hook v0.8.1: Building container actions is not currently supported). " +
      "Use the action's published image (uses: docker://IMAGE), a JavaScript or composite action, " +
      'or a pool without Kubernetes mode that runs Docker (Docker-in-Docker)'
  }
  if (!args.entryPoint) {
    return `The image action ${args.image} of this step names no entrypoint: GitHub's container hook v0.8.1 starts the step's pod ` +
      'with tail -f /dev/null and runs the entrypoint the step names. Add with: {entrypoint: ..., args: ...} to the step'
  }
  return ''
}

function main() {
  const raw = fs.readFileSync(0, 'utf8')
  const lines = raw.split('\n').filter(l => l.trim() !== '')
  // The hook reads the last line of its input (hooklib getInputFromStdin).
  const input = JSON.parse(lines[lines.length - 1])
  switch (input.command) {
    case 'prepare_job':
      return prepareJob(input)
    case 'run_container_step': {
      const why = refusedStep(input.args || {})
      if (why) {
        process.stdout.write(`::error::${why}\n`)
        return 1
      }
      return runHook(input, process.env)
    }
    default:
      return runHook(input, process.env)
  }
}

process.exitCode = main()
