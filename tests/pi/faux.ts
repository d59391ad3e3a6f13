/**
 * Test-only Pi extension: a scripted, in-memory model ("faux/faux-1") that records every request.
 *
 * Each provider request is appended to $CWA_TEST_PI_DIR/requests.jsonl (its messages, as the
 * model receives them). The reply depends only on the transcript: after a tool result, a text
 * that quotes the result; when the latest user message (after the last assistant message) holds
 * `CALL {"name": ..., "arguments": ...}`, that tool call; otherwise a short acknowledgement.
 */
import { appendFileSync } from "node:fs";
import { join } from "node:path";
import { fauxAssistantMessage, fauxProvider, fauxText, fauxToolCall } from "@earendil-works/pi-ai";

function textOf(message: any): string {
	if (typeof message?.content === "string") return message.content;
	return (message?.content ?? []).map((b: any) => (b?.type === "text" ? b.text : "")).join("");
}

function respond(context: any) {
	const messages = context.messages;
	const dir = process.env.CWA_TEST_PI_DIR;
	if (dir) appendFileSync(join(dir, "requests.jsonl"), JSON.stringify(messages) + "\n");
	const last = messages[messages.length - 1];
	if (last?.role === "toolResult") return fauxAssistantMessage(fauxText(`tool said: ${textOf(last).slice(0, 4000)}`));
	let lastAssistant = -1;
	messages.forEach((m: any, i: number) => {
		if (m.role === "assistant") lastAssistant = i;
	});
	for (const message of messages.slice(lastAssistant + 1)) {
		const found = message.role === "user" ? /CALL (\{.*\})\s*$/s.exec(textOf(message)) : null;
		if (found) {
			const call = JSON.parse(found[1]);
			return fauxAssistantMessage(fauxToolCall(call.name, call.arguments), { stopReason: "toolUse" });
		}
	}
	const user = [...messages].reverse().find((m: any) => m.role === "user");
	return fauxAssistantMessage(fauxText(`ack ${textOf(user).slice(0, 60).replace(/\s+/g, " ")}`));
}

export default function (pi: any) {
	const faux = fauxProvider({
		provider: "faux",
		models: [
			{ id: "faux-1", contextWindow: Number(process.env.CWA_TEST_FAUX_WINDOW ?? 200000), maxTokens: 8192 },
			{ id: "faux-small", contextWindow: 32000, maxTokens: 4096 },
		],
	});
	faux.setResponses(Array.from({ length: 2000 }, () => respond));
	pi.registerProvider(faux.provider);
}
