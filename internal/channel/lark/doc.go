// Package lark owns the Lark (Feishu) channel of Pet: the event webhook, the bot binding, the
// sender allowlist and pairing, and the Loci that serve Lark entries with their durable queues
// of Deliveries. HTTP lives in server/channel.go; the user guide is docs/lark.md.
//
// # Rooms
//
// The package has three parts:
//
//   - larkapi (a sub-package) is the Lark API side, the only code that imports Lark's SDK: the
//     outbound client, the parsing of a received message, @mention rendering, and the
//     protocol parts of webhook verification (decryption, signature, token comparison).
//   - locus (a sub-package) is the Loci with their durable queues of Deliveries as one type,
//     locus.Queue, that owns its locks and maps: the records (main and child sessions, Loci,
//     Deliveries) and their operations on the store, the keyed locks (a Locus's Lark side
//     effects, a session's Q&A group), the image spool (the spool sub-package), and what this
//     process is settling, activating and running. It knows nothing of Lark's API. The
//     channel's API speaks its types under the same names here (Locus, Delivery,
//     DeliveryView, …: aliases in records.go).
//   - The channel itself, Channel: webhook.go (authentication and admission), worker.go (the
//     inbound queue), commands.go, binding.go (Bind, Unbind, and binder: the live binding with
//     its locks), allowlist.go and pairing.go (access; pairing: the pending code, in memory or
//     in the shared store),
//     delivery.go (the Lark side of the Delivery lifecycle: reply, reactions, images, the
//     sweep, recovery), executor.go (the built-in executor: the agent loop of internal/agent
//     with read-only tools over the Locus's workspace and the Delivery's images as image
//     content), ask.go (ask_main_session and the main session's answers), qa.go (the Q&A group
//     action) and shared.go (replicas).
//
// # Key layout
//
// Everything lives in the portable store (internal/store), under lark-*. The channel's own:
//
//	lark-binding/current                  the verified binding's non-secret half (the secrets are in Secrets)
//	lark-allow/<open_id>                  an allowlisted sender (AllowEntry)
//	lark-inbound/<time>-<counter>[-<replica>]  an admitted event waiting for the worker
//	lark-dedup/e/<event id>, m/<message id>    de-duplication marks (TTL Config.DedupTTL)
//	lark-question/<id>                    a child's question to its main session (Question: pending, answered or
//	                                      expired; TTL QuestionTTL, 24h from the question)
//
// the Loci's (locus's doc has the detail):
//
//	lark-session/<id>                     a main session (Session)
//	lark-session-chat/<chat id>           → the id of the session created for that chat
//	lark-child/<id>                       the child session that serves one Locus (Child, with its short history)
//	lark-locus/<id>                       a Locus (an entry, its main session, its child, its queue's head)
//	lark-entry/<entry>                    → the id of the entry's active Locus (entry: chat id, or chat id#thread id)
//	lark-delivery/<locus>/<seq>           a Delivery (seq zero-padded to 20 digits, so keys sort in queue order)
//
// and over a shared store also (all with a TTL; see shared.go):
//
//	lark-pair/current                     the pairing code: salt, hash, expiry
//	lark-meta/epoch                       the cluster's start (the watermark)
//	lark-ready/<delivery>                 the Delivery's activation is done (locus)
//	lark-settling/<delivery>              a replica is settling the Delivery (locus)
//	lark-spool/<delivery>                 the Delivery's spooled images: index, media types, sizes (spool)
//	lark-spool-body/<delivery>/<n>        an image's bytes, raw (spool)
//
// # The Delivery lifecycle
//
// A Delivery is one admitted message handed to its Locus's child. It goes queued → current →
// settled (done, failed or timed_out), in order of arrival within its Locus:
//
//   - Admitted: the webhook records the event (with its dedup marks) in lark-inbound, in one
//     transaction, and answers Lark only after that commit. The worker then finds or creates
//     the entry's Locus (locus.Queue.Bootstrap) and enqueues a Delivery (Enqueue). A Locus with
//     no current Delivery makes it current at once; otherwise it waits, queued, behind at most
//     Config.MaxQueue others (beyond that the event is dropped as queue_full).
//   - Current: accepted now, with a deadline Config.InitialDeadline away. Activation follows,
//     once per process and under the Locus's side lock: the working reaction on the triggering
//     message, its images into the spool, and, for the built-in executor, an agent run (its
//     tool calls recorded on the Delivery as they are made; its final text the reply). An
//     external executor pulls it with Current (which waits for the activation) or WaitCurrent,
//     and may move its deadline with Wait, never past Config.MaxDeadline after acceptance.
//   - Settled: Finish (a reply or a reason not to reply: done), Cancel or an executor failure
//     (failed), the sweep past the deadline (timed_out), or ArchiveLocus (the queued ones
//     failed first, then the current one). A reply is sent before anything is written; if it
//     fails the Delivery stays current. Then its spooled images are removed, and one
//     transaction marks it settled, adds the question and answer to the child's history, makes
//     the next queued Delivery current and keeps only the newest 50 settled ones; any run of it
//     is stopped. Only one settlement of a Delivery runs at a time (in this process, and over a
//     shared store in every replica). locus.Queue.Settle does all of this but the reply, which
//     it asks of the channel.
//   - After the settlement, asynchronously: the working reaction is swapped for DONE (done) or
//     CrossMark (failed, timed out), and the next Delivery is activated.
//   - After a restart (or when a replica becomes leader), recover activates every current
//     Delivery again and starts the first queued one of an idle Locus (locus.Queue.Resume).
package lark
