/**
 * cwa for Pi: a thin adapter over one `cwa serve` child per session (docs/pi.md).
 *
 * Everything that decides lives in cwa (the session engine, search, the archive); this file only
 * forwards Pi's events and tool calls as JSON lines and applies the answers. Its one rule of its
 * own is the failure policy: cwa must never break the user's session. If the child dies it is
 * restarted once; if that fails too, messages pass through unchanged (an oversized user input
 * excepted: it is never forwarded raw) under a visible warning.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { appendFileSync, closeSync, openSync, readFileSync, readSync, realpathSync, statSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const GUIDANCE = JSON.parse(readFileSync(join(HERE, "..", "routing.json"), "utf8"));
const STATUS_KEY = "cwa";
const MAX_LINEAGE = 16; // ancestors named to the archive (contract limit MAX_LINEAGE_DEPTH)
const HEADER_BYTES = 65536; // a session header is one short JSON line
const OVERSIZED_CHARS = 16000 * 4; // maxInlineUserTokens (default) under the chars/4 estimate
const TIMEOUT_MS: Record<string, number> = { "session-context": 120000, "session-compact": 300000, "session-settled": 120000 };
const DEFAULT_TIMEOUT_MS = 60000;
const STOP_GRACE_MS = 3000;
const TIMING_WINDOW = 512; // context round trips kept for /window status
const PROMPT_SNIPPET = "Gather dated records from this project's archived conversation (cwa)";
const TRACE = process.env.CWA_PI_TRACE; // a file: one JSON line per context round trip (docs/pi.md)

type Json = any;

class CwaError extends Error {
	constructor(
		public code: string,
		message: string,
		public details: Json = {},
	) {
		super(message);
	}
}

/** The `cwa` command: $CWA_EXECUTABLE, else `cwa` on PATH, else the one of the environment this
 * file was installed into (a venv's bin/, or a checkout's .venv/bin/). */
function resolveCwa(): string[] {
	const explicit = process.env.CWA_EXECUTABLE;
	if (explicit) return [explicit];
	for (const dir of (process.env.PATH ?? "").split(delimiter)) {
		if (dir && isFile(join(dir, "cwa"))) return [join(dir, "cwa")];
	}
	let dir = HERE;
	for (let up = 0; up < 8; up++) {
		for (const candidate of [join(dir, "bin", "cwa"), join(dir, ".venv", "bin", "cwa")]) {
			if (isFile(candidate)) return [candidate];
		}
		dir = dirname(dir);
	}
	return ["python3", "-m", "cwa"];
}

function isFile(path: string): boolean {
	try {
		return statSync(path).isFile();
	} catch {
		return false;
	}
}

/** The first line of a session file, if it is a structurally valid Pi session header. */
function readHeader(path: string): { id: string; parentSession?: string } | undefined {
	let fd: number | undefined;
	try {
		fd = openSync(path, "r");
		const buffer = Buffer.alloc(HEADER_BYTES);
		const length = readSync(fd, buffer, 0, HEADER_BYTES, 0);
		const end = buffer.subarray(0, length).indexOf(10);
		if (end < 0) return undefined;
		const header = JSON.parse(buffer.subarray(0, end).toString("utf8"));
		const validId = typeof header?.id === "string" && header.id.length > 0 && header.id.length <= 256;
		if (header?.type !== "session" || !validId || typeof header.cwd !== "string") return undefined;
		if (header.parentSession !== undefined && typeof header.parentSession !== "string") return undefined;
		return { id: header.id, parentSession: header.parentSession };
	} catch {
		return undefined;
	} finally {
		if (fd !== undefined) closeSync(fd);
	}
}

/** The session's ancestors, nearest first, read through `parentSession` links of valid headers only. */
function parentLineage(parentSession: string | undefined, self: string): string[] {
	const lineage: string[] = [];
	const seen = new Set([self]);
	let next = parentSession;
	while (next && lineage.length < MAX_LINEAGE) {
		const header = readHeader(next);
		if (!header || seen.has(header.id)) break;
		seen.add(header.id);
		lineage.push(header.id);
		next = header.parentSession;
	}
	return lineage;
}

/** One `cwa serve` child: requests as JSON lines, answers matched by id. */
class Serve {
	private child: ChildProcess;
	private pending = new Map<number, { resolve: (v: Json) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();
	private nextId = 1;
	private buffered = "";
	private stderrTail = "";
	exited = false;
	readonly exitedPromise: Promise<void>;

	constructor(command: string[], env: NodeJS.ProcessEnv) {
		this.child = spawn(command[0], [...command.slice(1), "serve"], { stdio: ["pipe", "pipe", "pipe"], env });
		this.exitedPromise = new Promise((resolve) => {
			const done = (why: string) => {
				if (this.exited) return;
				this.exited = true;
				this.failAll(new CwaError("serve-died", `cwa serve ${why}${this.stderrTail ? `: ${this.stderrTail.trim().slice(-300)}` : ""}`));
				resolve();
			};
			this.child.on("exit", (code, signal) => done(signal ? `was killed (${signal})` : `exited (${code})`));
			this.child.on("error", (error) => done(`could not start (${error.message})`));
		});
		this.child.stdout!.setEncoding("utf8");
		this.child.stdout!.on("data", (chunk: string) => this.receive(chunk));
		this.child.stderr!.setEncoding("utf8");
		this.child.stderr!.on("data", (chunk: string) => {
			this.stderrTail = (this.stderrTail + chunk).slice(-4096);
		});
		this.child.stdin!.on("error", () => {}); // a dead child's pipe: reported by "exit"
	}

	get pid(): number | undefined {
		return this.child.pid;
	}

	request(method: string, params: Json): Promise<Json> {
		if (this.exited) return Promise.reject(new CwaError("serve-died", "cwa serve is not running"));
		const id = this.nextId++;
		return new Promise((resolve, reject) => {
			const timer = setTimeout(() => {
				this.pending.delete(id);
				reject(new CwaError("timeout", `cwa serve did not answer ${method} in ${(TIMEOUT_MS[method] ?? DEFAULT_TIMEOUT_MS) / 1000} s`));
			}, TIMEOUT_MS[method] ?? DEFAULT_TIMEOUT_MS);
			this.pending.set(id, { resolve, reject, timer });
			this.child.stdin!.write(JSON.stringify({ id, method, params }) + "\n");
		});
	}

	private receive(chunk: string): void {
		this.buffered += chunk;
		let newline: number;
		while ((newline = this.buffered.indexOf("\n")) >= 0) {
			const line = this.buffered.slice(0, newline);
			this.buffered = this.buffered.slice(newline + 1);
			if (!line.trim()) continue;
			let reply: Json;
			try {
				reply = JSON.parse(line);
			} catch {
				continue;
			}
			const waiter = this.pending.get(reply.id);
			if (!waiter) continue;
			this.pending.delete(reply.id);
			clearTimeout(waiter.timer);
			if (reply.error) waiter.reject(new CwaError(reply.error.code, reply.error.message, reply.error.details ?? {}));
			else waiter.resolve(reply.result);
		}
	}

	private failAll(error: Error): void {
		for (const [id, waiter] of this.pending) {
			clearTimeout(waiter.timer);
			waiter.reject(error);
			this.pending.delete(id);
		}
	}

	/** End of input stops the child; a child that does not stop in time is terminated. */
	async stop(): Promise<void> {
		if (this.exited) return;
		this.child.stdin!.end();
		const timeout = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms).unref());
		await Promise.race([this.exitedPromise, timeout(STOP_GRACE_MS)]);
		if (!this.exited) {
			this.child.kill("SIGTERM");
			await Promise.race([this.exitedPromise, timeout(STOP_GRACE_MS)]);
		}
		if (!this.exited) this.child.kill("SIGKILL");
	}
}

function textOf(message: Json): string {
	const content = message?.content;
	if (typeof content === "string") return content;
	if (!Array.isArray(content)) return "";
	return content.map((block: Json) => (block?.type === "text" && typeof block.text === "string" ? block.text : "")).join("");
}

/** Pi's quick identity of a message: enough to notice that the host's history changed under us. */
function shallowKey(message: Json): string {
	return `${message?.role}:${message?.timestamp}:${message?.toolCallId ?? ""}:${message?.customType ?? ""}`;
}

function percentile(values: number[], q: number): number {
	if (!values.length) return 0;
	const sorted = [...values].sort((a, b) => a - b);
	return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

function compactNumber(tokens: number): string {
	return tokens >= 1000 ? `${Math.round(tokens / 1000)}K` : `${tokens}`;
}

/** The footer: `Epoch 3 · 15/20 turns · ~92K/96K tokens`, flagged near (80%) and at the limit. */
export function footer(status: Json): string {
	if (!status || status.turns == null || !status.limits) return `cwa · epoch ${status?.epoch ?? 0}`;
	const level = status.level === "at-limit" ? " · at limit" : status.level === "near-limit" ? " · near limit" : "";
	return (
		`Epoch ${status.epoch} · ${status.turns}/${status.limits.rotationTurns} turns · ` +
		`~${compactNumber(status.tokens)}/${compactNumber(status.limits.rotationTokens)} tokens${level}`
	);
}

export default function cwa(pi: Json) {
	const state = {
		serve: undefined as Serve | undefined,
		ready: undefined as Promise<Json> | undefined,
		command: [] as string[],
		project: "",
		sessionId: "",
		lineage: [] as string[],
		archivePath: "",
		restarts: 0,
		failed: undefined as string | undefined, // why cwa is off for this session
		sent: undefined as { keys: string[]; digest: string } | undefined,
		providerCopy: [] as Json[],
		status: undefined as Json,
		timings: [] as number[],
		lastMode: "full" as "full" | "delta",
		rotations: 0, // seen by this Pi process in this session
		ui: undefined as Json,
	};

	// Requests that move the engine's transcript forward run one at a time, so each starts from
	// the digest the previous one returned (a settle still running when the next turn's first
	// model call arrives would otherwise turn that call into a full resend).
	let queue: Promise<unknown> = Promise.resolve();
	function inOrder<T>(work: () => Promise<T>): Promise<T> {
		const next = queue.then(work, work);
		queue = next.catch(() => undefined);
		return next;
	}

	const scope = () => ({
		project: state.project,
		sessionId: state.sessionId,
		...(state.lineage.length ? { parentSessionId: state.lineage[0] } : {}),
	});

	const setStatus = (text: string | undefined) => state.ui?.setStatus?.(STATUS_KEY, text);
	const notify = (text: string, kind: "info" | "warning" | "error" = "info") => state.ui?.notify?.(text, kind);

	function start(): void {
		const serve = new Serve(state.command, process.env);
		state.serve = serve;
		state.sent = undefined; // a new child holds no transcript: the next context call is full
		state.ready = serve.request("session-open", { project: state.project, sessionId: state.sessionId, lineage: state.lineage }).then(
			(opened) => {
				state.archivePath = opened.archive;
				return opened;
			},
			async (error: CwaError) => {
				if (error.code === "conflict" && state.lineage.length) {
					// a lineage the archive contradicts is not used: this session goes on without it
					state.lineage = [];
					notify(`cwa: the session's parent lineage was not recorded (${error.message})`, "warning");
					return serve.request("session-open", { project: state.project, sessionId: state.sessionId });
				}
				throw error;
			},
		);
		state.ready.catch(() => {}); // awaited (and reported) by the first request that needs it
	}

	function giveUp(why: string): void {
		state.failed = why;
		setStatus(`cwa off: ${why.slice(0, 160)} · messages pass through unchanged`);
		notify(`cwa stopped for this session: ${why.slice(0, 500)}. Messages pass through unchanged.`, "warning");
	}

	/** A request to the child; a dead child is restarted once per session, then cwa gives up. */
	async function call(method: string, params: Json): Promise<Json> {
		if (state.failed) throw new CwaError("cwa-off", `cwa is off for this session: ${state.failed}`);
		if (!state.serve) throw new CwaError("cwa-off", "cwa has not started");
		try {
			await state.ready;
			return await state.serve.request(method, params);
		} catch (error: any) {
			if (!(error instanceof CwaError) || (error.code !== "serve-died" && !state.serve.exited)) throw error;
			if (state.restarts >= 1) {
				giveUp(error.message);
				throw error;
			}
			state.restarts += 1;
			start();
			try {
				await state.ready;
				return await state.serve!.request(method, params);
			} catch (again: any) {
				if (again instanceof CwaError && (again.code === "serve-died" || state.serve!.exited)) giveUp(again.message);
				throw again;
			}
		}
	}

	function showStatus(status: Json): void {
		state.status = status;
		if (!state.failed) setStatus(footer(status));
	}

	/** One `session-context` round trip: only the new messages when the prefix is unchanged. */
	async function provide(messages: Json[], ctx: Json): Promise<Json[]> {
		const model = ctx.model
			? { id: ctx.model.id, provider: ctx.model.provider, contextWindow: ctx.model.contextWindow, maxTokens: ctx.model.maxTokens }
			: undefined;
		const reserve = pi.getSettings?.()?.compaction?.reserveTokens;
		const base = { ...scope(), ...(model ? { model } : {}), ...(Number.isInteger(reserve) ? { reserveTokens: reserve } : {}) };
		const keys = messages.map(shallowKey);
		const sent = state.sent;
		const unchanged = sent && sent.keys.length <= keys.length && sent.keys.every((key, i) => key === keys[i]);
		let answer: Json;
		state.lastMode = "full";
		if (sent && unchanged) {
			try {
				answer = await call("session-context", { ...base, messages: messages.slice(sent.keys.length), baseDigest: sent.digest, answer: "delta" });
				state.lastMode = "delta";
			} catch (error: any) {
				if (!(error instanceof CwaError && error.code === "conflict" && error.details?.reason === "resync-required")) throw error;
				answer = await call("session-context", { ...base, messages, answer: "full" });
			}
		} else {
			answer = await call("session-context", { ...base, messages, answer: "full" });
		}
		state.providerCopy = answer.delta ? [...state.providerCopy.slice(0, answer.delta.keep), ...answer.delta.append] : answer.messages;
		state.sent = { keys, digest: answer.digest };
		showStatus(answer.status);
		for (const event of answer.events ?? []) {
			if (event.type === "rotated") state.rotations += 1;
			if (event.type === "checkpoint-needed") notify("cwa: the latest turn alone fills the window; compact the session (/compact).", "warning");
			if (event.type === "emergency-retention") notify(`cwa: kept only ${event.kept} of ${event.wanted} recent turns to stay within the window.`, "warning");
		}
		return state.providerCopy;
	}

	/** What goes to the model when cwa cannot answer: the messages unchanged, except that an
	 * oversized user input is replaced by a short notice (it stays in Pi's session file). */
	function withoutOversized(messages: Json[], why: string): { messages: Json[]; latestOversized: boolean } {
		let latestUser = -1;
		messages.forEach((m, i) => {
			if (m?.role === "user") latestUser = i;
		});
		let latestOversized = false;
		const out = messages.map((message, i) => {
			if (message?.role !== "user" || textOf(message).length <= OVERSIZED_CHARS) return message;
			if (i === latestUser) latestOversized = true;
			const notice = `[cwa: a user input of ${textOf(message).length} characters was not sent to the model: it could not be archived (${why.slice(0, 200)}). It is kept in Pi's session file.]`;
			return { ...message, content: [{ type: "text", text: notice }] };
		});
		return { messages: out, latestOversized };
	}

	pi.on("session_start", async (_event: Json, ctx: Json) => {
		if (state.serve) void state.serve.stop(); // a start without a shutdown first: never two children
		state.ui = ctx.ui;
		state.command = resolveCwa();
		try {
			state.project = realpathSync(ctx.cwd);
		} catch {
			state.project = ctx.cwd;
		}
		state.sessionId = ctx.sessionManager.getSessionId();
		state.lineage = parentLineage(ctx.sessionManager.getHeader?.()?.parentSession, state.sessionId);
		state.restarts = 0;
		state.rotations = 0;
		state.failed = undefined;
		state.providerCopy = [];
		start(); // readiness is answered asynchronously: session_start stays fast
	});

	pi.on("context", async (event: Json, ctx: Json) => {
		if (!state.serve) return undefined;
		const started = performance.now();
		try {
			const messages = await inOrder(() => provide(event.messages, ctx));
			const ms = performance.now() - started;
			state.timings.push(ms);
			if (state.timings.length > TIMING_WINDOW) state.timings.shift();
			if (TRACE) {
				const last = event.messages[event.messages.length - 1];
				const record = { ms, mode: state.lastMode, messages: event.messages.length, providerMessages: messages.length, last: last?.role, tokens: state.status?.tokens };
				appendFileSync(TRACE, JSON.stringify(record) + "\n");
			}
			return { messages };
		} catch (error: any) {
			state.sent = undefined;
			const why = error?.message ?? String(error);
			const { messages, latestOversized } = withoutOversized(event.messages, why);
			if (latestOversized) {
				setStatus(`cwa: turn aborted: the input could not be archived (${why.slice(0, 120)})`);
				notify(`cwa: your message was too large to send inline and could not be archived (${why.slice(0, 300)}). The turn was aborted; nothing of it was sent.`, "error");
				ctx.abort();
			} else if (!state.failed) {
				setStatus(`cwa: this call passed through unchanged (${why.slice(0, 120)})`);
			}
			return { messages };
		}
	});

	/** Archive the turns that are complete. The engine has seen the transcript up to the last
	 * model call; the messages after it (the final answer, at least) go with the request. */
	async function settle(messages: Json[] | undefined, aborted: boolean): Promise<void> {
		const sent = state.sent;
		const keys = messages?.map(shallowKey);
		const extends_ = messages && sent && sent.keys.length <= keys!.length && sent.keys.every((key, i) => key === keys![i]);
		let settled: Json;
		try {
			settled = extends_
				? await call("session-settled", { ...scope(), aborted, messages: messages!.slice(sent!.keys.length), baseDigest: sent!.digest })
				: await call("session-settled", { ...scope(), aborted, ...(messages ? { messages } : {}) });
		} catch (error: any) {
			if (!(error instanceof CwaError && error.code === "conflict" && error.details?.reason === "resync-required")) throw error;
			settled = await call("session-settled", { ...scope(), aborted, messages });
		}
		// the engine now holds these messages: the next call extends them
		state.sent = messages && settled.digest ? { keys: keys!, digest: settled.digest } : undefined;
		if (settled.status) showStatus(settled.status);
	}

	pi.on("agent_settled", async (event: Json, ctx: Json) => {
		if (!state.serve || state.failed) return;
		// the conversation as a `context` event shows it (Pi's own system messages left out), taken
		// now; the request runs in order behind any other, and Pi does not wait for it
		const messages: Json[] | undefined = ctx?.sessionManager?.buildSessionProjection?.()?.messages?.filter((m: Json) => m?.role !== "system");
		inOrder(() => settle(messages, Boolean(event?.aborted))).catch((error: any) => {
			state.sent = undefined;
			if (!state.failed) setStatus(`cwa: settling failed (${String(error?.message).slice(0, 120)})`);
		});
	});

	pi.on("session_before_compact", async (event: Json) => {
		const prep = event.preparation;
		const previous = [...(event.branchEntries ?? [])].reverse().find((entry: Json) => entry?.type === "compaction");
		try {
			const answer = await call("session-compact", {
				...scope(),
				messagesToSummarize: prep.messagesToSummarize,
				turnPrefixMessages: prep.turnPrefixMessages ?? [],
				isSplitTurn: Boolean(prep.isSplitTurn),
				...(typeof prep.previousSummary === "string" ? { previousSummary: prep.previousSummary } : {}),
				...(previous?.details && typeof previous.details === "object" ? { previousDetails: previous.details } : {}),
				...(event.reason ? { reason: event.reason } : {}),
				...(Number.isInteger(prep.tokensBefore) ? { tokensBefore: prep.tokensBefore } : {}),
				...(prep.firstKeptEntryId ? { firstKeptEntryId: prep.firstKeptEntryId } : {}),
			});
			const fileOps = prep.fileOps ?? {};
			const asList = (value: Json) => (value instanceof Set ? [...value] : Array.isArray(value) ? value : []);
			return {
				compaction: {
					summary: answer.summary,
					firstKeptEntryId: prep.firstKeptEntryId,
					tokensBefore: prep.tokensBefore,
					details: { ...answer.details, fileOps: { read: asList(fileOps.read), written: asList(fileOps.written), edited: asList(fileOps.edited) } },
				},
			};
		} catch (error: any) {
			notify(`cwa: compaction cancelled: the messages could not be archived first (${String(error?.message).slice(0, 300)})`, "error");
			return { cancel: true };
		}
	});

	pi.on("session_compact", async () => {
		state.sent = undefined; // the transcript now starts with the new summary: send it whole
	});

	pi.on("model_select", async (event: Json) => {
		// every request carries the current model; an empty delta now shows the new limits at once
		if (!state.serve || state.failed || !event?.model) return;
		const model = { id: event.model.id, provider: event.model.provider, contextWindow: event.model.contextWindow, maxTokens: event.model.maxTokens };
		await inOrder(async () => {
			const sent = state.sent;
			if (!sent) return;
			try {
				const answer = await call("session-context", { ...scope(), model, messages: [], baseDigest: sent.digest, answer: "delta" });
				state.providerCopy = [...state.providerCopy.slice(0, answer.delta.keep), ...answer.delta.append];
				state.sent = { keys: sent.keys, digest: answer.digest };
				showStatus(answer.status);
			} catch {
				state.sent = undefined; // the next call sends everything with the new model
			}
		});
	});

	pi.on("session_shutdown", async () => {
		const serve = state.serve;
		if (!serve) return;
		if (!state.failed && !serve.exited) {
			// shutting down: a failure here loses nothing the last settle did not already archive
			await inOrder(() => serve.request("session-settled", scope())).catch(() => undefined);
		}
		state.serve = undefined;
		await serve.stop();
	});

	// ---- tools: each runs in cwa (the `tool` method); this only registers and forwards --------

	const guidelines: string[] = GUIDANCE.guidelines;
	const offered = Object.entries(GUIDANCE.tools as Record<string, Json>).filter(([, tool]) => !tool.hosts || tool.hosts.includes("pi"));

	const runTool = (name: string, args: Json) => call("tool", { ...scope(), host: "pi", name, arguments: args ?? {} });

	offered.forEach(([name, tool], index) => {
		pi.registerTool({
			name,
			label: tool.label,
			description: tool.description,
			parameters: tool.parameters,
			// the routing guidelines go into Pi's system prompt once, with the first tool (routing.json's order)
			...(index === 0 ? { promptSnippet: PROMPT_SNIPPET, promptGuidelines: guidelines } : {}),
			async execute(_id: string, params: Json) {
				try {
					const answer = await runTool(name, params);
					return { content: [{ type: "text", text: answer.text }], details: answer.details, ...(answer.isError ? { isError: true } : {}) };
				} catch (error: any) {
					// cwa itself could not answer (not running, timed out): the model reads why
					const code = error instanceof CwaError ? error.code : "internal";
					return {
						content: [{ type: "text", text: `cwa ${code}: ${String(error?.message ?? error).slice(0, 1000)}` }],
						details: { error: { code, message: String(error?.message ?? error), details: error?.details ?? {} } },
						isError: true,
					};
				}
			},
		});
	});

	// ---- /window --------------------------------------------------------------------------------

	async function windowStatus(): Promise<string> {
		const [session, storage] = await Promise.all([call("session-status", scope()).catch((e: Error) => ({ error: e.message })), call("status", { project: state.project })]);
		const lines = [`cwa · session ${state.sessionId} · archive ${state.archivePath}`];
		if (session.error) lines.push(`session: ${session.error}`);
		else {
			lines.push((session.inMemory ? footer(session) : `Epoch ${session.epoch} (transcript not loaded yet)`) + ` · ${state.rotations} rotation(s) in this run`);
			if (session.limits) {
				lines.push(`limits: window ${session.limits.contextWindow}, usable ${session.limits.usableTokens}, rotation at ${session.limits.rotationTokens} tokens or ${session.limits.rotationTurns} turns`);
			}
			lines.push(`externalized ${session.externalized ?? 0} · oversized ${session.oversized ?? 0} · hint tokens ${session.hintTokens ?? 0}${session.rotationQueued ? " · rotation queued" : ""}${session.checkpointNeeded ? " · compaction needed" : ""}`);
		}
		lines.push(storageLine(storage));
		if (state.timings.length) {
			lines.push(`context round trip: p50 ${percentile(state.timings, 0.5).toFixed(1)} ms · p95 ${percentile(state.timings, 0.95).toFixed(1)} ms over ${state.timings.length} calls`);
		}
		if (state.failed) lines.push(`cwa is off for this session: ${state.failed}`);
		return lines.join("\n");
	}

	function mebibytes(bytes: number | undefined): string {
		return `${((bytes ?? 0) / 1048576).toFixed(1)} MiB`;
	}

	function storageLine(storage: Json): string {
		const states = Object.entries(storage.documents?.byState ?? {}).map(([name, n]) => `${n} ${name}`).join(", ");
		return `storage (this project): ${storage.documents?.total ?? 0} document(s)${states ? ` (${states})` : ""}, ${mebibytes(storage.bytes?.logical)} archived · file ${mebibytes(storage.bytes?.file)} + WAL ${mebibytes(storage.bytes?.wal)}`;
	}

	async function windowCommand(args: string): Promise<string> {
		const [sub = "status", ...rest] = args.trim().split(/\s+/).filter(Boolean);
		const tail = args.trim().slice(sub.length).trim();
		switch (sub) {
			case "status":
				return windowStatus();
			case "search": {
				if (!tail) return "usage: /window search <terms>";
				// a person's search: everything of the project, what the model still sees included
				const answer = await call("search", { project: state.project, query: tail, scope: "project", limit: 5 });
				if (!answer.results.length) return "no results";
				return answer.results
					.map((r: Json, i: number) => `${i + 1}. ${r.documentId} v${r.version} ${r.kind} ${r.createdAt.slice(0, 16)} ${r.matchType} ${r.band}\n   ${String(r.snippet).replace(/\s+/g, " ").slice(0, 200)}`)
					.join("\n");
			}
			case "recall": {
				if (rest[0] !== "why") return "usage: /window recall why";
				const why = await call("why", scope());
				const spans = (why.hints ?? []).map((h: Json) => h.kind ?? h.type).join(", ");
				return `last preflight: ${why.outcome} (${why.reason}) for ${why.messageKey} at ${why.decidedAt}${spans ? ` · hints: ${spans}` : ""}`;
			}
			case "rotate": {
				const answer = await call("session-rotate", scope());
				return `rotation queued: the session rotates at its next message (epoch ${answer.status?.epoch ?? "?"})`;
			}
			case "supersede": {
				if (!rest[0]) return "usage: /window supersede <documentId> [note]";
				const note = tail.slice(rest[0].length).trim() || `${rest[0]} was retired by the user on ${new Date().toISOString().slice(0, 10)}: it is no longer current.`;
				const answer = await call("supersede", { ...scope(), documentId: rest[0], note });
				return `${rest[0]} superseded by ${answer.replacement.documentId} v${answer.replacement.version} (the note is archived in its place)`;
			}
			case "archive":
				return archiveCommand(rest);
			default:
				return "usage: /window [status | search <terms> | recall why | rotate | supersede <id> <note> | archive status | archive prune | archive redact session|project [TOKEN]]";
		}
	}

	async function archiveCommand(rest: string[]): Promise<string> {
		const [what, target, token] = rest;
		if (what === "status") {
			const found = await call("status", { project: state.project, archive: true });
			const life = found.archive ?? {};
			const classes = Object.entries(life.byClass ?? {})
				.map(([name, states]: [string, Json]) => `${name}: ` + Object.entries(states).map(([st, v]: [string, Json]) => `${v.documents} ${st} (${mebibytes(v.bytes)})`).join(", "))
				.join("\n  ");
			return [
				`archive ${state.archivePath}`,
				storageLine(found),
				`by retention class (whole archive):\n  ${classes || "empty"}`,
				`index ${mebibytes(life.bytes?.index)} · vectors ${mebibytes(life.bytes?.vectors)} · free ${mebibytes(life.bytes?.free)}`,
				`due expirations ${life.dueExpirations ?? 0} · next expiry ${life.nextExpiry ?? "none"} · pinned ${life.pinned ?? 0} · leases ${life.activeLeases ?? 0} · protections ${life.contextProtections ?? 0} · purge pending ${life.purgePending ?? 0}`,
			].join("\n");
		}
		if (what === "prune") {
			const done = await call("maintain", {});
			return `maintenance pass: ${done.expired} expired, ${done.purged} purged, ${done.leasesDeleted} leases and ${done.protectionsDeleted} protections dropped; file ${mebibytes(done.space?.fileBytesBefore)} → ${mebibytes(done.space?.fileBytesAfter)}${done.more ? " (more to do: run it again)" : ""}`;
		}
		if (what === "redact" && (target === "session" || target === "project")) {
			const request = { project: state.project, ...(target === "session" ? { sessionId: state.sessionId } : {}) };
			const answer = await call("redact", token ? { ...request, confirm: token } : request);
			if (!token) {
				return `${answer.documents} document(s) of this ${target} would be tombstoned (out of search and recall at once, bytes removed by the next maintenance). To confirm: /window archive redact ${target} ${answer.confirm}`;
			}
			return `${answer.redacted} document(s) redacted.`;
		}
		return "usage: /window archive status | prune | redact session|project [TOKEN]";
	}

	pi.registerCommand("window", {
		description: "cwa: status of the context window and archive; search, rotate, supersede, archive status/prune/redact",
		handler: async (args: string, ctx: Json) => {
			state.ui = ctx.ui ?? state.ui;
			let text: string;
			try {
				text = await windowCommand(args ?? "");
			} catch (error: any) {
				text = `cwa: ${error?.code ?? "error"}: ${error?.message ?? error}`;
			}
			ctx.ui.notify(text, "info");
		},
	});
}
