// The router's job done the usual Node.js way, for comparison only:
// spawn the command, merge stdout and stderr, stop it at a timeout, print one
// JSON object. Usage: node node_wrapper.js CMD [ARGS...]
const { spawn } = require("child_process");
const [cmd, ...args] = process.argv.slice(2);
const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], detached: true });
let out = "";
child.stdout.on("data", (d) => (out += d));
child.stderr.on("data", (d) => (out += d));
const timer = setTimeout(() => { try { process.kill(-child.pid, "SIGKILL"); } catch {} }, 60000);
child.on("error", (e) => { clearTimeout(timer); print(`spawn failed: ${e.message}`); });
child.on("close", () => { clearTimeout(timer); print(out); });
function print(content) {
  process.stdout.write(JSON.stringify({ content, directTTS: false, interruptMode: 2 }) + "\n");
}
