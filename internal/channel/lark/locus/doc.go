// Package locus owns the Loci of the Lark channel and their durable queues of Deliveries: the
// records (main sessions, the child session of each Locus with its short history, the Loci,
// the Deliveries), every operation on them in the store, and what this process knows of the
// Deliveries (which are being settled, activated and run here, and whose activation is done).
// One type, Queue, holds all of it and owns its locks and maps.
//
// The package knows nothing of Lark's API: it imports neither the Lark SDK nor larkapi. The
// channel (package lark) drives the Queue and does everything that talks to Lark: the reply
// (through the Send it hands to Settle), the reactions, the download of images into the spool,
// the built-in executor's agent run. The image spool is the spool sub-package's; the Queue
// owns the one Spool of its Deliveries.
//
// # Key layout
//
// In the portable store (internal/store), under lark-*, beside the channel's own keys (the
// binding, the allowlist, the inbound queue, dedup marks, pairing: package lark's doc):
//
//	lark-session/<id>                 a main session (Session): registered, or created for a chat
//	lark-session-chat/<chat id>       → the id of the main session created for that chat
//	lark-child/<id>                   the child session that serves one Locus (Child, with at most HistoryTurns turns)
//	lark-locus/<id>                   a Locus: its entry, main session, child, tier, executor, state and its queue's head
//	                                  (Current, NextSeq, Queued)
//	lark-entry/<entry>                → the id of the entry's active Locus (entry: chat id, or chat id#thread id)
//	lark-delivery/<locus>/<seq>       a Delivery (seq zero-padded to 20 digits, so a Locus's keys sort in queue order);
//	                                  its id is <locus>-<seq>
//
// and over a store other replicas share also (with a TTL):
//
//	lark-ready/<delivery>             the Delivery's activation is done (TTL MaxDeadline + 1h)
//	lark-settling/<delivery>          a replica is settling the Delivery (TTL SettleTTL): <instance>/<random>
//
// Ids minted here are a letter and lowercase base32 without look-alikes: l… (12) for a Locus,
// c… (12) for a child, s… (20) for a main session created for a chat. A Locus keeps its newest
// 50 settled Deliveries; older ones are pruned when one settles.
//
// # The Delivery lifecycle
//
// A Delivery goes queued → current → settled (done, failed or timed_out), in order of arrival
// within its Locus, and a Locus has at most one current Delivery:
//
//   - Enqueue (in the caller's transaction, after Bootstrap or ActiveLocus found the entry's
//     Locus) appends it. An idle Locus makes it current at once; otherwise it waits, queued,
//     behind at most MaxQueue others (ErrQueueFull beyond that).
//   - Current: accepted now (AcceptedAt), with a Deadline InitialDeadline away. Extend moves the
//     deadline, never back and never past MaxDeadline after acceptance. Activate activates it,
//     once per process at a time and under the Locus's side lock, with the caller's Lark side
//     (Activation): the working reaction, recorded on it (taken back when it was settled
//     meanwhile), its images into the Spool, and the end of Current's wait, here and over a
//     shared store on every replica (lark-ready and the note "ready <id>"); then the caller's
//     executor starts. A built-in turn is recorded with StartRun; its agent run (tools, tool
//     calls and their results) is written on the Delivery with RecordAgent as each call is
//     made, and its final record comes with the Outcome.
//   - Settle ends it with an Outcome, once: a claim in this process and, over a shared store,
//     the lark-settling mark. It checks that the Delivery is still current (and the caller's
//     Check), sends the reply through the caller's Send (an error leaves it current), removes
//     its images under the Locus's side lock, and in one transaction marks it settled, adds the
//     question and answer to the child's history, makes the next queued Delivery current, and
//     prunes; over a shared store it also clears lark-ready and notes "settled <id>". Then any
//     run of it is stopped. Settle returns the next Delivery; starting it is the caller's.
//     AfterSettle then runs the caller's reaction swap under the side lock, with the working
//     reaction as recorded by then.
//   - FailQueued fails the queued ones (an archive does this before settling the current one,
//     so that no next one starts), ArchiveIdle then archives the Locus and its child and frees
//     its entry. Overdue lists the current Deliveries past their deadline, for the caller's
//     sweep to settle as timed_out.
//   - Resume, after a start or when a replica becomes the leader, lists every current
//     Delivery to activate again, and makes the first queued one of an idle Locus current.
//   - Heard applies another replica's notes: a settlement stops the run here and drops the
//     local copies of its images; an activation ends the wait of Current.
//
// # Locks
//
// mu guards the four maps (settling, activating, runs, ready) and is never held across a store
// call. The keyed locks serialise a Locus's side effects ("locus:<id>": Activate, the image
// removal and transaction of Settle, AfterSettle; activation and settlement never overtake
// each other) and, for the channel, a session's Q&A group ("qa:<session>", Lock). A
// settlement takes its claims first, then the side lock.
package locus
