// cwa's OpenCode plugin (written by `cwa hooks install opencode`; docs/capture.md).
//
// Thin, like the Pi extension: every event becomes one short-lived call of cwa's hook client with
// the event as JSON on stdin, bounded in time (the client hands it to the archive's hook server). A user message gets cwa's hint (when preflight
// finds one) as a synthetic text part of that message, so it reaches the model with it and stays
// with it; a session that goes idle, or is about to be compacted, has its new turns archived from
// OpenCode's own database. Whatever cwa does or fails to do, OpenCode goes on: a failure is
// logged beside the archive and shown by `cwa doctor`.
import { spawnSync } from "node:child_process";

const COMMAND: string[] = ["cwa", "hook", "opencode"];
const HINT_MS = 10_000;
const ARCHIVE_MS = 60_000;

function call(event: Record<string, unknown>, timeout: number): any {
	try {
		const run = spawnSync(COMMAND[0], COMMAND.slice(1), {
			input: JSON.stringify(event),
			encoding: "utf8",
			timeout,
			stdio: ["pipe", "pipe", "ignore"],
		});
		const out = (run.stdout || "").trim();
		return out ? JSON.parse(out) : null;
	} catch {
		return null;
	}
}

export const CwaPlugin = async ({ directory }: { directory: string }) => ({
	"chat.message": async (input: any, output: any) => {
		const words = (output.parts || [])
			.filter((part: any) => part.type === "text" && !part.synthetic)
			.map((part: any) => part.text)
			.join("\n");
		const answer = call(
			{ event: "prompt", sessionID: input.sessionID, messageID: output.message?.id ?? input.messageID, prompt: words, cwd: directory },
			HINT_MS,
		);
		if (!answer || typeof answer.hint !== "string") return;
		const last = output.parts[output.parts.length - 1];
		output.parts.push({
			id: `${last?.id ?? "prt"}cwa`, // sorts right after the user's own part
			sessionID: input.sessionID,
			messageID: output.message?.id ?? last?.messageID,
			type: "text",
			text: answer.hint,
			synthetic: true,
		});
	},
	event: async ({ event }: { event: any }) => {
		if (event?.type === "session.idle") {
			call({ event: "idle", sessionID: event.properties?.sessionID, cwd: directory }, ARCHIVE_MS);
		}
	},
	"experimental.session.compacting": async (input: any) => {
		call({ event: "compacting", sessionID: input.sessionID, cwd: directory }, ARCHIVE_MS);
	},
});
