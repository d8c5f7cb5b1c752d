// Runs the install scripts of dependencies already in node_modules, as `npm rebuild` does, minus
// npm's own work around them: npm rebuild first loads and checks the whole installed tree (about
// 1 s of a 2 s rebuild on the development machine), which a tree restored from the dependency
// cache does not need. The scripts are run by @npmcli/run-script, the library npm rebuild itself
// uses (same shell, PATH with every node_modules/.bin above the package, npm_package_* and
// npm_lifecycle_* variables, `node-gyp rebuild` for a package with binding.gyp and no install
// script), taken from the npm the agent runs.
//
//   node -e <this file> NPM_ROOT PACKAGE_FOLDER...
//
// Like npm, the packages run one event at a time (preinstall, install, postinstall), the packages
// of one event side by side; the first failure fails the whole (exit code 1, after the others of
// that event end). Each script's output goes to this process's stdout and stderr.
'use strict'
const fs = require('fs')
const path = require('path')

const [npmRoot, ...folders] = process.argv.slice(1)
const runScript = require(require.resolve('@npmcli/run-script', { paths: [npmRoot] }))
const EVENTS = ['preinstall', 'install', 'postinstall']

async function runEvent (event, folder) {
  const pkg = JSON.parse(fs.readFileSync(path.join(folder, 'package.json'), 'utf8'))
  const command = pkg.scripts && pkg.scripts[event]
  if (command) {
    console.log(`> ${pkg.name}@${pkg.version} ${event}: ${command}`)
  }
  const env = { npm_package_json: path.join(folder, 'package.json') }
  const { code, signal } = await runScript({ event, path: folder, pkg, env, stdio: 'inherit' })
    .catch(error => error)
  if (code !== 0 || signal) {
    throw new Error(`${pkg.name}@${pkg.version} ${event} failed (${signal || `exit code ${code}`})`)
  }
}

async function main () {
  for (const event of EVENTS) {
    const results = await Promise.allSettled(folders.map(folder => runEvent(event, folder)))
    const failed = results.filter(result => result.status === 'rejected')
    if (failed.length) {
      for (const { reason } of failed) {
        console.error(String(reason && reason.message ? reason.message : reason))
      }
      process.exit(1)
    }
  }
}

main()
