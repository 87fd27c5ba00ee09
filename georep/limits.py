"""Every limit georep enforces, in one place.

Names read ``noun_unit_max`` (or ``_default`` for tunables with a default). Code that
enforces a limit imports it from here; tests that probe a limit import it from here too.
The relations between limits are checked when this module is imported, so an edit that
breaks them fails at start-up rather than at 3 a.m.
"""

from __future__ import annotations

from georep.invariant import invariant

KIB = 1024
MIB = 1024 * KIB

# --- entries and frames -------------------------------------------------------------
#: Largest payload a ledger entry may carry.
entry_payload_bytes_max = 5 * MIB
#: Fixed size of the entry header (ids, LAC, length, CRC32C); see storage/entry.py.
entry_header_bytes = 36
#: Largest frame on the bookie protocol. A larger length prefix closes the connection
#: before a byte of the body is read.
bookie_frame_bytes_max = entry_payload_bytes_max + entry_header_bytes + 64

# --- ledger client -------------------------------------------------------------------
#: Adds in flight per ledger handle; ``add`` waits for room past this (backpressure).
pending_adds_count_max = 10_000
#: Bytes of payload in flight per ledger handle.
pending_adds_bytes_max = 64 * MIB
#: Deadline for one request to one bookie.
bookie_request_timeout_ms_default = 5_000
#: After this long without an answer a read also asks the next replica.
speculative_read_timeout_ms_default = 200
#: Entries one ``read`` call may ask for.
read_batch_entries_max = 10_000
#: Reads in flight per ``read`` call.
read_concurrency_max = 256
#: Ensemble changes one handle may make in a row before it gives up.
ensemble_changes_count_max = 32
#: Compare-and-set retries on ledger metadata before giving up.
metadata_cas_retries_max = 16
#: Largest ensemble a ledger may use.
ensemble_size_max = 64

# --- bookie --------------------------------------------------------------------------
#: A journal group closes after this long, or at ``journal_group_bytes_max``.
journal_group_wait_ms_default = 2
journal_group_bytes_max = 4 * MIB
#: A journal file rolls over at this size.
journal_file_bytes_max = 256 * MIB
#: Adds waiting for the journal; past this the bookie stops reading from connections.
journal_queue_count_max = 100_000
#: Write cache size; a checkpoint starts when it is half full.
write_cache_bytes_max = 256 * MIB
#: An entry log file rolls over at this size.
entry_log_file_bytes_max = 512 * MIB
#: Seconds between checkpoints when the write cache does not fill first.
checkpoint_interval_s_default = 10.0
#: Seconds between garbage-collection passes over deleted ledgers.
gc_interval_s_default = 60.0
#: Requests one bookie connection may have in flight before reads pause.
connection_requests_in_flight_max = 20_000
#: Connections one bookie accepts.
bookie_connections_max = 1_024

# --- metadata, leases, auto-recovery ------------------------------------------------
#: How long a SQLite metadata transaction waits for another process's write lock.
sqlite_busy_timeout_s_max = 30.0
#: A bookie's registration lease; it renews at a third of this.
bookie_lease_s_default = 10.0
#: Auditor leadership lease.
auditor_lease_s_default = 10.0
#: Lock a replication worker holds on an under-replicated ledger.
underreplication_lock_s_default = 60.0
#: An open ledger's last fragment with a lost bookie is fenced after this grace period.
open_ledger_rereplication_grace_s_default = 30.0
#: Seconds between auditor passes.
audit_interval_s_default = 5.0

# --- relations -----------------------------------------------------------------------
invariant(bookie_frame_bytes_max > entry_payload_bytes_max + entry_header_bytes)
invariant(journal_group_bytes_max <= journal_file_bytes_max)
invariant(journal_file_bytes_max >= 2 * bookie_frame_bytes_max)
invariant(write_cache_bytes_max >= 2 * bookie_frame_bytes_max)
invariant(speculative_read_timeout_ms_default < bookie_request_timeout_ms_default)
invariant(pending_adds_bytes_max >= bookie_frame_bytes_max)
invariant(pending_adds_count_max <= connection_requests_in_flight_max)
invariant(bookie_lease_s_default > 3 * journal_group_wait_ms_default / 1000)

# --- bookie internals (appended with the bookie) ----------------------------------------
#: Largest journal record: one ENTRY record carries one entry plus 17 bytes of type and ids.
journal_record_bytes_max = bookie_frame_bytes_max
#: Bytes a bookie connection may have queued for the peer before the bookie stops
#: reading from it (the peer is not reading its responses).
connection_write_buffer_bytes_max = 8 * MIB
#: Largest reply delay the ``delay_ms`` fault accepts.
fault_delay_ms_max = 60_000
invariant(journal_record_bytes_max >= entry_payload_bytes_max + entry_header_bytes + 17)
invariant(journal_file_bytes_max >= journal_group_bytes_max + journal_record_bytes_max)
invariant(entry_log_file_bytes_max >= 2 * bookie_frame_bytes_max)
invariant(connection_write_buffer_bytes_max >= bookie_frame_bytes_max)

# --- Pulsar binary protocol (broker/protocol) -----------------------------------------
#: Largest message payload a producer may publish: Pulsar's default ``maxMessageSize``.
#: The broker announces it in CONNECTED; clients size their batches by it.
pulsar_message_bytes_max = 5 * MIB
#: Room a frame may use beyond the payload: command, checksum, metadata.
pulsar_frame_padding_bytes = 10 * KIB
#: Largest Pulsar frame: the ``totalSize`` prefix (which does not count itself). A larger
#: prefix is refused before a byte of the body is buffered.
pulsar_frame_bytes_max = pulsar_message_bytes_max + pulsar_frame_padding_bytes
#: Messages one batched payload may hold (the client's default batch is 1,000).
pulsar_batch_messages_count_max = 100_000

invariant(pulsar_frame_bytes_max > pulsar_message_bytes_max)
# max_message_size travels as an int32 and totalSize as a u32.
invariant(pulsar_frame_bytes_max < 2**31)
# Each batched message costs at least 6 bytes (size prefix + payload_size field), so a
# count limit above this could never be reached within one message.
invariant(pulsar_batch_messages_count_max * 6 <= pulsar_message_bytes_max)
