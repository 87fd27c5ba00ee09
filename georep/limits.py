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
#: Full groups waiting while a sync runs are written together and synced once, up to this.
journal_sync_bytes_max = 32 * MIB
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
#: Write transactions one SQLite group commit may join (``storage/meta/engine.py``): the
#: writes queued while the previous commit synced share the next commit and its sync. It
#: bounds how long the write lock is held and how many callers one failed sync fails.
metadata_group_commit_count_max = 64
#: A bookie's registration lease; it renews at a third of this.
bookie_lease_s_default = 10.0
#: How old the list of writable bookies a new ensemble is chosen from may be
#: (``storage/client/placement.py``): one read serves every ledger created meanwhile.
placement_writable_cache_s = 1.0
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
invariant(journal_group_bytes_max <= journal_sync_bytes_max <= journal_file_bytes_max)
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
#: Disk usage (used / size of the data directory's file system) at which a bookie warns,
#: at which it turns read-only, and below which a read-only bookie takes writes again:
#: BookKeeper's diskUsageWarnThreshold, diskUsageThreshold and diskUsageLwmThreshold.
disk_usage_warn_fraction_default = 0.90
disk_usage_read_only_fraction_default = 0.95
disk_usage_writable_fraction_default = 0.90
#: Seconds between two looks at the disk (BookKeeper's diskCheckInterval); a bookie whose
#: journal or checkpoint failed retries at the same pace.
disk_check_interval_s_default = 1.0
invariant(
    0.0 < disk_usage_writable_fraction_default <= disk_usage_read_only_fraction_default <= 1.0
)
invariant(disk_usage_warn_fraction_default <= disk_usage_read_only_fraction_default)
invariant(journal_record_bytes_max >= entry_payload_bytes_max + entry_header_bytes + 17)
invariant(journal_file_bytes_max >= journal_group_bytes_max + journal_record_bytes_max)
invariant(entry_log_file_bytes_max >= 2 * bookie_frame_bytes_max)
invariant(connection_write_buffer_bytes_max >= bookie_frame_bytes_max)

# --- text from outside -----------------------------------------------------------------
#: Digits a decimal integer read from text (origin positions, ports, query parameters,
#: file names) may have: a u64 has 20, and Python refuses int() of a string past 4,300.
decimal_digits_max = 20

#: Characters of one integer in a REST request body (sign included): a u64 has 20 digits.
json_integer_chars_max = 24
#: Seconds a REST connection may stay without a whole request (idle, or a request head
#: sent slowly) before it is closed.
rest_connection_idle_s_max = 15.0

# --- Pulsar binary protocol (wire/) -----------------------------------------
#: Room a frame may use beyond the payload: command, checksum, metadata (Pulsar's
#: ``MESSAGE_SIZE_FRAME_PADDING``).
pulsar_frame_padding_bytes = 10 * KIB
#: Largest message payload a producer may publish, as the broker announces it in
#: CONNECTED (clients check every payload, and size their batches, by it). Derived from
#: what storage takes so that the two agree: a payload of this size, with metadata up to
#: ``pulsar_message_metadata_bytes_max`` and the origin a gateway adds to its copy, is
#: one entry a bookie stores (5 MiB - 10 KiB with the defaults; Pulsar says 5 MiB and
#: lets its storage take 5 MiB + 10 KiB).
pulsar_message_bytes_max = entry_payload_bytes_max - pulsar_frame_padding_bytes
#: Metadata (properties, keys, ...) a stored message may carry beyond its payload: a SEND
#: whose entry is larger than ``pulsar_message_bytes_max`` plus this can never be stored
#: (or copied) and is refused to its producer for good.
pulsar_message_metadata_bytes_max = 5 * KIB
#: What a gateway's copy adds to an entry's metadata (origin properties, replicated_from,
#: its producer name) at most, and what its SEND command takes.
replication_metadata_bytes_max = 1 * KIB
pulsar_send_command_bytes_max = 1 * KIB
#: Largest Pulsar frame: the ``totalSize`` prefix (which does not count itself). A larger
#: prefix is refused before a byte of the body is buffered (the connection closes); a
#: smaller SEND whose entry storage cannot take is refused to its producer instead.
pulsar_frame_bytes_max = pulsar_message_bytes_max + pulsar_frame_padding_bytes
#: Messages one batched payload may hold (the client's default batch is 1,000).
pulsar_batch_messages_count_max = 100_000

invariant(pulsar_frame_bytes_max > pulsar_message_bytes_max)
# The sizes agree: whatever an application may send, and its copy, is one storable entry,
# and the copy's frame fits the frame a broker announcing the same maximum reads.
invariant(
    pulsar_message_bytes_max + pulsar_message_metadata_bytes_max + replication_metadata_bytes_max
    <= entry_payload_bytes_max
)
invariant(
    pulsar_message_metadata_bytes_max
    + replication_metadata_bytes_max
    + pulsar_send_command_bytes_max
    + 64  # magic, checksum and the three size prefixes
    <= pulsar_frame_padding_bytes
)
invariant(pulsar_frame_bytes_max <= entry_payload_bytes_max + pulsar_frame_padding_bytes)
# max_message_size travels as an int32 and totalSize as a u32.
invariant(pulsar_frame_bytes_max < 2**31)
# Each batched message costs at least 6 bytes (size prefix + payload_size field), so a
# count limit above this could never be reached within one message.
invariant(pulsar_batch_messages_count_max * 6 <= pulsar_message_bytes_max)

# --- embedded broker (broker/) -----------------------------------------------------------
#: Characters of a tenant or namespace name (Pulsar's rule: ``[-=:.\w]+``).
tenant_name_chars_max = 64
namespace_name_chars_max = 64
#: Characters of a topic's local name (after ``tenant/namespace/``), partition suffix
#: included.
topic_local_name_chars_max = 96
#: Partitions a partitioned topic may have.
partitions_count_max = 1_024
#: Connections one broker serves at once; more are closed right after accept.
broker_connections_max = 4_096
#: Producers and consumers one connection may open.
producers_per_connection_max = 10_000
consumers_per_connection_max = 10_000
#: Seconds a connection may take to send CONNECT.
connect_handshake_s_max = 10.0
#: A connection idle this long is sent a PING; one still silent a second interval later
#: is closed (Pulsar's ``keepAliveIntervalSeconds``).
keepalive_interval_s_default = 30.0
#: Publishes one connection may have waiting for storage before the broker stops reading
#: from it (Pulsar's ``maxPendingPublishRequestsPerConnection``).
pending_publishes_per_connection_max = 1_000
#: Bytes of MESSAGE frames queued for one connection before its dispatch pauses.
connection_dispatch_buffer_bytes_max = 8 * MIB
#: Entries a dispatcher reads from its cursor in one round.
dispatcher_read_entries_max = 100
#: Entries a Shared or Key_Shared dispatcher holds for redelivery; above it, it stops
#: reading new entries until the held ones are dispatched or acknowledged.
dispatcher_replay_entries_max = 10_000
#: Messages delivered to one consumer and not yet acknowledged before dispatch to it
#: pauses (Pulsar's ``maxUnackedMessagesPerConsumer``).
consumer_unacked_messages_max = 50_000
#: Positions of partially acknowledged batches one subscription remembers.
subscription_partial_batches_max = 100_000
#: Marker positions a subscription remembers while waiting for its MDP to reach them.
subscription_markers_max = 10_000
#: Characters of a producer name (deduplication keeps names in its cursor's properties).
producer_name_chars_max = 256
#: Producer names whose highest sequence id a topic remembers for deduplication.
dedup_producers_count_max = 5_000
#: The deduplication state is snapshotted into its cursor every this many entries; on
#: topic load at most about this many entries are scanned to rebuild it.
dedup_snapshot_entries_interval = 1_000
#: Entries read per round when scanning a topic (dedup recovery, seek by publish time).
topic_scan_read_entries_max = 500
#: Key_Shared hash space: a key's hash is taken modulo this (Pulsar's ``DEFAULT_RANGE_SIZE``).
key_shared_hash_range_size = 2**16
#: Partitioned topics the broker catalog (broker/catalog.py) may hold.
catalog_records_max = 100_000
#: Seconds the broker trusts that a namespace it saw in the metadata store still exists.
namespace_cache_s_default = 5.0
#: Seconds between passes that trim every loaded topic's acknowledged ledgers.
topic_trim_interval_s_default = 60.0
#: Marker entries GET_LAST_MESSAGE_ID steps back over to find the last message.
last_message_id_markers_skipped_max = 1_000
#: Topic stats' rates (msgRateIn, msgThroughputOut, ...) are what was counted in the last
#: this many seconds, divided by it; they read 0.0 one window after traffic stops.
stats_rate_window_s_default = 10
#: One-second buckets a rate keeps, at most (so the window is at most this long).
stats_rate_buckets_max = 600
#: Seconds between passes that expire, on every loaded topic, the messages older than
#: their namespace's message TTL (Pulsar's ``messageExpiryCheckIntervalInMinutes``).
#: Namespace policies (retention, TTL) are read again at each trim and expiry pass.
message_expiry_interval_s_default = 60.0
#: Entries one expiry pass reads per topic, at most; a longer expired backlog is expired
#: over several passes.
message_expiry_entries_per_pass_max = 10_000

# A topic's managed-ledger name, ``tenant/namespace/persistent/local``, must fit a metadata
# name (255 characters).
invariant(tenant_name_chars_max + namespace_name_chars_max + topic_local_name_chars_max + 13 <= 255)
invariant(dispatcher_read_entries_max <= read_batch_entries_max)
invariant(dispatcher_read_entries_max <= dispatcher_replay_entries_max)
invariant(topic_scan_read_entries_max <= read_batch_entries_max)
invariant(dedup_snapshot_entries_interval >= topic_scan_read_entries_max)
invariant(connection_dispatch_buffer_bytes_max >= pulsar_frame_bytes_max)
invariant(keepalive_interval_s_default > connect_handshake_s_max)
invariant(key_shared_hash_range_size <= 2**31)
invariant(1 <= stats_rate_window_s_default <= stats_rate_buckets_max)
invariant(message_expiry_entries_per_pass_max >= topic_scan_read_entries_max)

# --- managed ledgers and cursors (storage/managed_ledger) ---------------------------
#: Characters of a managed ledger's name (a topic partition's log) and of a cursor's name
#: (a subscription): both are metadata names.
managed_ledger_name_chars_max = 255
cursor_name_chars_max = 255
#: Entries one ``ManagedLedger.read`` or ``ManagedCursor.read_entries`` may return.
managed_ledger_read_entries_max = 5_000
#: Appends admitted to a managed ledger and not yet confirmed (sent to its ledger, or
#: queued behind a rollover); ``append_async`` waits for room past these (backpressure).
managed_ledger_pending_appends_count_max = 10_000
managed_ledger_pending_appends_bytes_max = 64 * MIB
#: Ledgers one managed ledger lists. At this many, rollover stops (the current ledger
#: grows on) until trimming makes room.
managed_ledger_ledgers_count_max = 10_000
#: Cursors one managed ledger may have.
managed_ledger_cursors_count_max = 1_000
#: Read handles of closed ledgers a managed ledger keeps open (least recently used go).
managed_ledger_read_handles_cached_max = 64
#: Entries confirmed last that the managed ledgers of one broker keep in memory for
#: readers at the tail, in bytes and in entries (the earliest confirmed go first;
#: ``storage/managed_ledger/entry_cache.py``). A read not served from them goes to the
#: bookies.
managed_ledger_cache_bytes_max = 32 * MIB
managed_ledger_cache_entries_max = 100_000
#: Cursors recovered at once when a managed ledger is opened.
cursor_recoveries_in_flight_max = 16
#: Individually deleted ranges a cursor keeps in memory. Past it the highest range is
#: forgotten: its entries count as unacknowledged again and are redelivered.
cursor_ranges_count_max = 100_000
#: Ranges each persisted cursor state holds, lowest first. Ranges above them are
#: acknowledged in memory only: a crash forgets them and they are redelivered.
cursor_ranges_persisted_max = 10_000
#: Bytes of a cursor's properties (UTF-8 JSON), persisted with every state.
cursor_properties_bytes_max = 2 * MIB
#: Partially acknowledged batch entries (entry -> bitset of the members still
#: unacknowledged) a cursor keeps in memory. A partial acknowledgement of one more entry
#: is not remembered: that batch is delivered whole again (the client's own tracker
#: filters what it acknowledged; a new client gets the whole batch).
cursor_batch_entries_count_max = 100_000
#: Partially acknowledged batch entries each persisted cursor state holds, lowest first,
#: and the bytes they may take there (20 + 8 per 64 members each). Those above are kept
#: in memory only: a crash forgets them and their batches are delivered whole again
#: (at-least-once for the overflow, as for ranges).
cursor_batch_entries_persisted_max = 10_000
cursor_batch_bytes_persisted_max = 1 * MIB
#: Bytes of one persisted cursor state: fixed part, ranges (32 bytes each), properties,
#: partially acknowledged batches.
cursor_state_bytes_max = (
    64
    + 32 * cursor_ranges_persisted_max
    + cursor_properties_bytes_max
    + 4
    + cursor_batch_bytes_persisted_max
)

invariant(managed_ledger_pending_appends_count_max <= pending_adds_count_max)
invariant(managed_ledger_pending_appends_bytes_max <= pending_adds_bytes_max)
invariant(managed_ledger_pending_appends_bytes_max >= entry_payload_bytes_max)
invariant(managed_ledger_read_entries_max <= read_batch_entries_max)
invariant(cursor_ranges_persisted_max <= cursor_ranges_count_max)
invariant(cursor_state_bytes_max <= entry_payload_bytes_max)
invariant(cursor_batch_entries_persisted_max <= cursor_batch_entries_count_max)

# --- cluster admin REST (broker/admin) ------------------------------------------------
#: Bytes of one admin request body; a larger one is refused with 413 before it is parsed.
admin_request_body_bytes_max = 1 * MIB
#: Redirects (307/308) one call to Pulsar's admin REST follows: a broker answers a
#: change to a bundle or topic it does not own with the owner's address.
pulsar_admin_redirects_max = 3
#: Tenants the metadata store may hold, and namespaces across all tenants.
tenants_count_max = 10_000
namespaces_count_max = 50_000
#: Roles in a tenant's ``adminRoles`` and clusters in its ``allowedClusters``.
tenant_admin_roles_count_max = 256
tenant_allowed_clusters_count_max = 256
#: Characters of one role or cluster name.
role_name_chars_max = 255
cluster_name_chars_max = 64
#: A broker listener's name, as a gateway names it (``listener_name``).
listener_name_chars_max = 64
#: Characters of a subscription name (it names the topic's cursor).
subscription_name_chars_max = 255
#: Positions one admin ``acknowledge`` request may carry.
acknowledge_positions_count_max = 10_000
#: Namespace policies, as Pulsar bounds them (Java ints): retention in minutes (-1 means
#: keep forever), a message TTL in seconds (0 means none).
retention_minutes_max = 2**31 - 1
retention_size_mb_max = 2**63 - 1
message_ttl_s_max = 2**31 - 1
#: Messages one ``skip`` request may skip.
skip_messages_count_max = 2**63 - 1
#: Characters of an admin bearer token: at least the minimum (so a token is not guessable
#: by hand), at most the maximum (an Authorization header stays small).
admin_token_chars_min = 16
admin_token_chars_max = 1_024
#: Tokens of each role (admin, read-only) the admin REST accepts.
admin_tokens_count_max = 64

invariant(tenants_count_max + namespaces_count_max <= catalog_records_max)
invariant(subscription_name_chars_max <= cursor_name_chars_max)
invariant(cluster_name_chars_max == tenant_name_chars_max)
# Each acknowledged position costs at most ~64 bytes of JSON (two 19-digit ids and keys).
invariant(acknowledge_positions_count_max * 64 <= admin_request_body_bytes_max)
invariant(admin_token_chars_min <= admin_token_chars_max)
# A tenant body with every role and cluster at full length must fit one request.
invariant(
    tenant_admin_roles_count_max * (role_name_chars_max + 3)
    + tenant_allowed_clusters_count_max * (cluster_name_chars_max + 3)
    <= admin_request_body_bytes_max
)

# --- subscription sync over the cluster admin REST (broker/topic_admin.py) ------------
#: Ranges and partially acknowledged batches one ``POST .../subscription/{s}/sync`` may
#: carry; the gateway's client (``client/admin.py``) splits a larger state over
#: several requests (and by ``admin_request_body_bytes_max``).
subscription_sync_ranges_count_max = 10_000
subscription_sync_batches_count_max = 1_000
#: Steps one sync takes after the mark-delete position, at most, to step it over
#: markers (a standby subscription has no dispatcher to do it): an entry read, or an
#: acknowledged range stepped over unread.
subscription_sync_marker_scan_entries_max = 10_000
#: Ranges and partially acknowledged batches ``GET .../sync-state`` reports per
#: subscription, lowest first: what one persisted cursor state holds (more are flagged
#: ``rangesTruncated`` / ``batchesTruncated``; a crash would forget those anyway).
sync_state_ranges_count_max = cursor_ranges_persisted_max
sync_state_batches_count_max = cursor_batch_entries_persisted_max

invariant(subscription_sync_ranges_count_max <= cursor_ranges_count_max)
invariant(subscription_sync_batches_count_max <= subscription_partial_batches_max)
invariant(sync_state_ranges_count_max <= cursor_ranges_count_max)
invariant(sync_state_batches_count_max <= cursor_batch_entries_count_max)
# --- end of subscription sync over the cluster admin REST -------------------------------

# --- embedded broker, relations with managed ledgers (broker/) ---------------------------
# The dedup snapshot (name -> sequence id, JSON) must fit a cursor's properties.
invariant(dedup_producers_count_max * (producer_name_chars_max + 32) <= cursor_properties_bytes_max)
# What a subscription remembers of partial batches, its cursor keeps; the bitset of the
# largest batch fits one persisted state.
invariant(subscription_partial_batches_max <= cursor_batch_entries_count_max)
invariant(20 + 8 * -(-pulsar_batch_messages_count_max // 64) <= cursor_batch_bytes_persisted_max)
invariant(dispatcher_read_entries_max <= managed_ledger_read_entries_max)
invariant(topic_scan_read_entries_max <= managed_ledger_read_entries_max)

# --- replication markers (georep/snapshots) ------------------------------------------
#: Largest marker payload accepted or written.
marker_bytes_max = 1 * MIB
#: Clusters named in one snapshot or update marker.
marker_clusters_count_max = 64
#: Ranges one acknowledged-ranges marker carries, over all its origins.
marker_ranges_count_max = 10_000
#: Partially acknowledged batches one acknowledged-ranges marker carries.
marker_partial_batches_count_max = 10_000
#: Characters in a snapshot id, cluster name or subscription name inside a marker.
marker_name_chars_max = 256
#: Completed snapshots cached per replicated subscription (default, and the most a
#: configuration may ask for).
snapshot_cache_count_default = 10
snapshot_cache_count_max = 1_000
#: Seconds between snapshot requests of a topic (while there is something new).
snapshot_interval_s_default = 1.0
#: A snapshot not complete after this long is abandoned; late answers are ignored.
snapshot_timeout_s_default = 30.0

invariant(marker_bytes_max <= pulsar_message_bytes_max)
invariant(marker_ranges_count_max <= cursor_ranges_persisted_max)
invariant(2 <= snapshot_cache_count_default <= snapshot_cache_count_max)
invariant(0 < snapshot_interval_s_default < snapshot_timeout_s_default)

#: Seconds a read of every topic name serves namespace listings (a gateway's discovery
#: lists all its namespaces at once; a topic created meanwhile shows at the next read).
topic_listing_reuse_s = 1.0

# --- the broker's change feed (broker/change_feed.py) ----------------------------------
#: Topics a namespace's change feed remembers; past it the oldest change is forgotten
#: and a reader behind it is told to read everything once (``reset``).
change_feed_topics_max = 100_000
#: Seconds a long poll that saw a first change waits for more, so a burst answers once.
change_feed_gather_s = 0.005
#: Longest wait a long poll may ask for (``waitMs``), and the largest ``after``.
change_feed_wait_ms_max = 60_000
change_feed_sequence_max = 2**63 - 1
#: The gateway's long poll: how long it asks the broker to wait.
sync_change_wait_s = 20.0

invariant(change_feed_gather_s < 1.0)
invariant(0 < sync_change_wait_s * 1000 <= change_feed_wait_ms_max)

# --- subscription sync in the gateway (georep/subsync) --------------------------------
#: Seconds between reads of the local cluster's subscription states (acks become
#: markers at most this much later).
sync_poll_interval_s_default = 0.2
#: Bounds of every configured sync period, in seconds.
sync_seconds_min = 0.01
sync_seconds_max = 3_600.0
#: Namespaces a [subscription_sync] table may name.
sync_namespaces_count_max = 1_000
#: Topic partitions one gateway syncs (one reader each), by default; the gateway's
#: ``[limits] sync_topics_max`` may ask for up to ``sync_topics_count_ceiling``. Past it,
#: topics are not synced: a WARNING, ``/metrics`` and a degraded ``/health`` say so.
sync_topics_count_max = 20_000
sync_topics_count_ceiling = 1_000_000
#: Replicated subscriptions synced per topic partition; more are left out (stats say so).
sync_subscriptions_per_topic_max = 100
#: Runs an origin index keeps (per origin cluster and partition); past it the oldest go,
#: and ranges mapping there are treated as already applied.
sync_index_runs_max = 1_000_000
#: Per synced subscription, the gateway's own sync markers read back and kept until every
#: remote stores a newer one (exposure.py); past it the oldest go, and the exposure
#: counts from an older marker (more, never less, than it is). Also the updates written
#: and not read back yet.
sync_exposure_markers_max = 256
#: Beside real Pulsar (no change feed): seconds between bulk reads of a namespace's
#: subscription stats, which say which topics' subscriptions moved.
sync_pulsar_scan_interval_s = 1.0
#: Beside real Pulsar, between those reads: a topic whose subscriptions moved within the
#: window is looked at alone (its ``stats``) every interval, at most this many topics
#: (the least recently moved leave first, with a WARNING; ``[subscription_sync]
#: pulsar_hot_topics_max``, 0: none), paced to at most this many requests a second
#: (``pulsar_hot_requests_per_s``), so many in flight at once.
sync_pulsar_hot_window_s = 30.0
sync_pulsar_hot_interval_s = 0.2
sync_pulsar_hot_topics_max = 64
sync_pulsar_hot_topics_ceiling = 10_000
sync_pulsar_hot_requests_per_s = 50.0
sync_pulsar_hot_requests_per_s_ceiling = 10_000.0
sync_pulsar_hot_requests_in_flight = 8
#: Seconds a sync whose reader or writer cannot attach waits before trying again, at
#: first and at most (doubling in between, with jitter: ``georep/runtime/retry.py``).
sync_retry_s_initial = 1.0
sync_retry_s_max = 30.0
#: The random part of every retry wait of a long-lived loop (``georep/runtime/retry.py``): 0.5
#: draws each wait from the upper half of its delay.
retry_jitter_fraction = 0.5
#: States waiting to be applied on the local cluster per topic partition; the reader
#: waits past it.
sync_pending_applies_max = 1_000
#: ``GET /sync/caught-up``: topic partitions one request looks at, at most (a larger
#: match is refused: narrow ``?topic=``), and the admin requests it has in flight at once
#: (each partition and side topic asks the local cluster how far it stores).
sync_caught_up_topics_max = 10_000
sync_caught_up_requests_concurrent = 16
#: The sync reader acknowledges (cumulatively) at least this often, in messages, and
#: whenever it has caught up: it must stay below what the broker lets one consumer hold.
sync_reader_ack_every_messages = 1_000

#: Beside a real Pulsar cluster (markers on a side topic): a source subscription's state
#: is written again after this many seconds even when unchanged, so the side topic's
#: retained part always holds it (Pulsar trims rolled-over ledgers nobody holds).
sync_side_resend_interval_s = 60.0
#: Entries one apply may acknowledge on a real Pulsar cluster (one ACK per
#: ``link_ack_ids_per_command_max``); past it the lowest go first, the rest next time.
sync_pulsar_apply_entries_max = 1_000_000

invariant(sync_seconds_min <= sync_poll_interval_s_default <= sync_seconds_max)
invariant(0 < sync_retry_s_initial <= sync_retry_s_max)
invariant(0 <= retry_jitter_fraction <= 1)
invariant(sync_topics_count_max <= sync_topics_count_ceiling)
invariant(sync_seconds_min <= snapshot_interval_s_default <= sync_seconds_max)
# The reader holds at most this plus one entry; the broker sends while below its limit.
invariant(sync_reader_ack_every_messages < consumer_unacked_messages_max)

# --- gateway: replicators, policies, REST (replicator/) -------------------------------
#: A replicated entry's sequence id on the remote is ``(ledger_id << bits) | entry_id``
#: (replicator/origin.py): entry ids of one ledger must fit the low bits, ledger ids the
#: rest of a signed 64-bit id (clients hold sequence ids as int64).
replication_entry_id_bits = 24
replication_ledger_id_bits = 63 - replication_entry_id_bits
#: Entries one ledger of a managed ledger may hold before it rolls over, at most: the
#: replicator needs every entry id below ``2**replication_entry_id_bits``. A ledger that
#: grows past it anyway (rollover stopped at ``managed_ledger_ledgers_count_max``) stalls
#: its replicators with an error instead of sending ids that could collide.
managed_ledger_rollover_entries_max = 2**replication_entry_id_bits
#: Characters of the gateway's client version string and of the names it gives
#: producers and subscriptions (``georep.repl.<cluster>``).
replication_name_prefix_chars = len("georep.repl.")
#: Connections a gateway link keeps to each broker; topics are spread over them by a
#: hash of their name, so that 10,000s of consumers stay under the broker's
#: ``consumers_per_connection_max`` on each.
link_connections_per_broker = 8
#: Redirects one topic lookup may follow before it gives up.
link_lookup_redirects_max = 8
#: Deadline of one request on a gateway link (CONNECT, LOOKUP, PRODUCER, SUBSCRIBE, ...).
link_request_timeout_s_default = 10.0
#: Seconds a gateway link may take to connect and finish its handshake.
link_connect_timeout_s_default = 10.0
#: A link silent this long is sent a PING; one silent a second interval later is closed.
link_keepalive_interval_s_default = 15.0
#: Bytes a link may have queued for its socket before writers wait for it to drain.
link_write_buffer_bytes_max = 8 * MIB
#: Bytes read from a link's socket at a time.
link_read_chunk_bytes = 256 * KIB
#: Message ids one individual ACK a link sends may carry (an acknowledger's batch).
link_ack_ids_per_command_max = 1_000
#: Messages a replicator's local consumer may have delivered and not yet replicated
#: (its receiver queue: the FLOW permits it grants). Batches count each message.
replicator_receive_messages_max = 5_000
#: Entries and bytes a replicator may have sent to its remote without a receipt;
#: ``send`` waits for room past either (backpressure from the remote).
replicator_pending_sends_count_max = 1_000
replicator_pending_sends_bytes_max = 32 * MIB
#: Entries a replicator holds between its local consumer and its remote producer (read
#: and not yet acknowledged locally: waiting to be sent, or sent without a receipt), and
#: their bytes; past either it stops taking entries from its consumer.
replicator_buffered_entries_max = 2_000
replicator_buffered_bytes_max = 64 * MIB
#: Retry backoff on remote and local faults: exponential from the initial delay, with
#: jitter, capped at the maximum (``georep/runtime/retry.py``). Retries never stop while the
#: policy says replicate.
replicator_retry_backoff_s_initial = 0.2
replicator_retry_backoff_s_max = 30.0
#: Seconds between a replicator's stats samples (backlog query, rates) while entries
#: flow; with nothing read, the backlog is asked when an entry arrives, or after the
#: idle interval while some is left.
replicator_stats_interval_s_default = 2.0
replicator_stats_idle_interval_s = 30.0
#: The gateway's watchdog: a replicator that moved no entry on for ``[gateway]
#: stuck_after_s`` while entries wait is stuck (a WARNING per remote with a count,
#: ``georep_replication_stuck``, ``/health`` degraded) and restarted, at most
#: ``replicator_restarts_max`` times until it moves again; then ``/health`` says it cannot
#: be healed. The bounds keep a stall apart from the waits a link fault already has
#: (a keep-alive noticing a black hole in 3 intervals, a backoff of at most 30 s).
replicator_stuck_after_s_default = 120.0
replicator_stuck_after_s_min = 5.0
replicator_stuck_after_s_max = 86_400.0
replicator_restarts_max = 3
#: How long a restart waits for the replicator's task to end once cancelled.
replicator_restart_wait_s = 30.0
#: ``/metrics`` per topic partition (``[metrics] topic_level = true``) for at most so
#: many of them; past it a WARNING and ``georep_gateway_metrics_topics_left_out``. Per
#: namespace (the default) a scrape beside 10,000 partitions stays a few series.
metrics_topic_partitions_max = 2_000
#: The gateway's live page (``GET /status``): rows (namespace x remote) a page, and the
#: seconds after which a browser reloads it.
status_page_rows_max = 50
status_page_refresh_s = 5
#: Replicators (topic partition x remote cluster) one gateway runs, by default; the
#: gateway's ``[limits] replicators_max`` may ask for up to the ceiling. Past it, topics
#: are not replicated: a WARNING, ``/metrics`` and a degraded ``/health`` say so.
gateway_replicators_count_max = 40_000
gateway_replicators_count_ceiling = 1_000_000
# A gateway's consumers on one broker (a replicator's and a sync reader's per partition)
# fit its connections there.
invariant(
    link_connections_per_broker * consumers_per_connection_max
    >= gateway_replicators_count_max + sync_topics_count_max
)
#: Replicators and syncs opening (subscribing, creating producers) at once on one cluster:
#: thousands of them starting together are paced, so neither the gateway nor a cluster
#: sees a storm; each cluster has its own, so the clusters work at once. An open waits
#: on metadata commits more than it uses CPU: at 1,000 partitions the start took 36.5 s
#: with 32, 24.4 s with 128 and 25.6 s with 512 (bench/README.md). Pulsar's own client
#: allows 5,000 lookups at once and its broker 5,000 topic loads.
gateway_opening_count_max = 128
#: Entries ``GET /stats`` returns per page (``?limit=``), by default and at most.
gateway_stats_page_default = 100
gateway_stats_page_max = 10_000
#: Remote clusters one gateway knows, and clusters one policy may name.
remote_clusters_count_max = 64
#: Replication policies the gateway's metadata store may hold (namespaces and topics).
replication_policies_count_max = 10_000
#: Subscription-sync policies the gateway's metadata store may hold (namespaces and topics).
sync_policies_count_max = 10_000
#: Characters of a subscription-name pattern (a sync policy's, stored or in the
#: configuration): a regular expression, matched against names of at most 255 characters.
sync_subscription_pattern_chars_max = 256
#: Topics one namespace listing may return before the gateway ignores the rest.
gateway_namespace_topics_max = 100_000
#: Seconds between passes over policies and local topic lists (new topics and
#: partitions are picked up within one pass; a REST change starts a pass at once).
gateway_discovery_interval_s_default = 3.0
#: A discovery pass still running after this many seconds is said at WARNING (again each
#: time as long), with where it waits: a pass that hangs holds back every start, stop
#: and hand-over of the gateway.
gateway_discovery_pass_slow_s = 30.0
#: Several gateway instances for one cluster (gateway/ownership.py): an instance's lease
#: in the metadata store, renewed every heartbeat. kill -9 of an instance moves its topic
#: partitions to the others within ``lease + heartbeat`` seconds (plus their start); an
#: instance that could not renew for ``lease - heartbeat`` stops everything it runs.
gateway_lease_s_default = 3.0
gateway_heartbeat_s_default = 0.5
#: How late a gateway's event loop runs what is due (runtime/loop_lag.py): probed every
#: first figure; the worst within the second is a metric; a wake-up the third late or
#: more is a stall, counted, and said at most once per the fourth.
loop_lag_probe_interval_s = 0.1
loop_lag_window_s = 10.0
loop_lag_stall_s = 1.0
loop_lag_say_every_s = 60.0
#: Bounds of ``[gateway] lease_s`` (the heartbeat must be at most a quarter of it).
gateway_lease_s_min = 1.0
gateway_lease_s_max = 300.0
#: Characters of an instance name (``[gateway] instance``, or generated).
gateway_instance_chars_max = 64
#: Topics first seen in a pass whose stray replication subscriptions are looked for, at
#: most (the rest are looked at in the following passes).
gateway_sweep_topics_per_pass_max = 100
#: Deadline of one request to a cluster's admin REST.
cluster_admin_request_timeout_s_default = 10.0
#: Beside a Pulsar cluster of several brokers, how often the brokers whose metrics pages
#: the sync reads are listed again, and how long a refused listing waits to be asked again.
cluster_brokers_refresh_s = 60.0
cluster_brokers_refused_retry_s = 600.0
#: Bytes of a gateway REST request body.
gateway_request_body_bytes_max = 64 * KIB
#: Characters of a service or admin URL in the gateway's configuration and store.
cluster_url_chars_max = 1_024
#: Bytes of the gateway's TOML configuration file.
gateway_config_bytes_max = 1 * MIB
#: Processes one ``georep up`` supervises, and the restart backoff of each.
up_processes_count_max = 64
up_restart_backoff_s_initial = 0.5
up_restart_backoff_s_max = 30.0

invariant(replication_entry_id_bits + replication_ledger_id_bits == 63)
invariant(managed_ledger_rollover_entries_max <= 2**replication_entry_id_bits)
# Producer names ``georep.repl.<cluster>`` must fit the broker's producer names, and the
# subscription ``georep.repl.<cluster>`` a subscription name.
invariant(replication_name_prefix_chars + cluster_name_chars_max <= producer_name_chars_max)
# A copy's additions (replicator/origin.py): three origin properties (keys of 21-22
# characters; the cluster, "L:E" of at most 40, the original producer name), replicated_from,
# the replicator's producer name and the sequence ids, each with its protobuf tag and length.
invariant(
    (21 + 22 + 22) + cluster_name_chars_max + 40 + producer_name_chars_max
    + cluster_name_chars_max + producer_name_chars_max + 2 * 11 + 8 * 4
    <= replication_metadata_bytes_max
)  # fmt: skip
invariant(replication_name_prefix_chars + cluster_name_chars_max <= subscription_name_chars_max)
invariant(replicator_receive_messages_max <= consumer_unacked_messages_max)
invariant(replicator_pending_sends_count_max <= pending_publishes_per_connection_max)
invariant(replicator_pending_sends_bytes_max >= pulsar_frame_bytes_max)
invariant(replicator_pending_sends_count_max <= replicator_buffered_entries_max)
invariant(replicator_pending_sends_bytes_max <= replicator_buffered_bytes_max)
invariant(link_write_buffer_bytes_max >= pulsar_frame_bytes_max)
# An ACK of that many ids (each id under 32 bytes) fits one frame.
invariant(link_ack_ids_per_command_max * 32 < pulsar_frame_bytes_max)
invariant(link_request_timeout_s_default < link_keepalive_interval_s_default * 2)
invariant(replicator_retry_backoff_s_initial < replicator_retry_backoff_s_max)
invariant(remote_clusters_count_max <= tenant_allowed_clusters_count_max)
invariant(up_restart_backoff_s_initial < up_restart_backoff_s_max)
invariant(replication_policies_count_max <= catalog_records_max)
invariant(sync_policies_count_max <= catalog_records_max)

# --- Spark reconciliation (georep/spark_reconcile) -----------------------------------
#: Rows of one Parquet row group written by ``georep export``: an export holds at most one
#: row group per table in memory, whatever the size of the topics it reads.
export_row_group_rows_max = 65_536
#: Messages the export's Reader prefetches (the client's receiver queue).
export_receiver_queue_messages_max = 1_000
#: Deadline of one read once the broker said a message is available.
export_read_timeout_ms_max = 30_000
#: Seconds between the export's progress lines on stderr.
export_progress_interval_s_default = 5.0
#: Topic partitions one export reads; a pattern matching more is refused.
export_topics_count_max = 100_000
#: Bytes of one admin REST answer the export accepts.
export_admin_answer_bytes_max = 64 * MIB
#: Entry ids per bucket of the acknowledged-range join: a range is cut into one piece per
#: ledger and bucket it covers, and a message meets only the pieces of its own bucket, so
#: the join compares at most this many messages with each piece.
reconcile_range_bucket_entries = 1_024
#: Range pieces sent whole to every task (broadcast join); more are joined by shuffle.
reconcile_broadcast_pieces_max = 2_000_000
#: Replicated copies (rows) up to which the reconciliation matches origins and copies by
#: a broadcast hash table instead of a shuffle. Measured on 10 million rows (5 million
#: copies): the broadcast was slower than the shuffle and, beside the cached tables, ran
#: the 4 GiB driver out of memory now and then; a million copies is about 0.1 GiB.
reconcile_broadcast_copies_max = 1_000_000
#: Input directories (one per cluster export) one reconciliation reads.
reconcile_inputs_count_max = 64
#: Topics drawn in the HTML summary's timeline charts, and rows shown per HTML table
#: (the Parquet tables hold every row).
reconcile_report_topics_max = 20
reconcile_report_rows_max = 200
#: Buckets along a topic's timeline in the chart.
reconcile_timeline_buckets_max = 60
#: Driver memory when ``georep reconcile`` starts its own Spark (not under spark-submit).
reconcile_driver_memory_mib_default = 4_096
#: Shuffle partitions when ``georep reconcile`` starts its own Spark; adaptive execution
#: coalesces them further.
reconcile_shuffle_partitions_default = 8

invariant(export_row_group_rows_max >= export_receiver_queue_messages_max)
invariant(reconcile_range_bucket_entries & (reconcile_range_bucket_entries - 1) == 0)
# Every persisted range of a cursor fits a broadcast many times over.
invariant(cursor_ranges_persisted_max * 100 <= reconcile_broadcast_pieces_max)
invariant(reconcile_inputs_count_max >= remote_clusters_count_max)
invariant(reconcile_report_topics_max <= reconcile_report_rows_max)

# --- timeouts, retries and waits of processes and their clients ------------------------
#: Seconds between retries of a cursor write that failed.
cursor_write_retry_s = 0.5
#: Retries of a cursor write that failed before the cursor gives up.
cursor_write_retries_max = 20
#: Seconds over which further log lines of one cause are counted and said as one line
#: (runtime/cause_log.py): a failure every cursor meets at once is two lines, not one each.
log_cause_window_s = 10.0
#: Pause of a dispatcher after an unexpected error in a round (a failed read, say).
dispatcher_error_backoff_s = 0.5
#: Seconds a starting cluster waits for enough bookies to be registered.
cluster_bookies_wait_s_max = 30.0
#: Room left in a sync request body for what the client's size estimate does not count.
sync_request_slack_bytes = 4 * KIB
#: Batch indexes one sync request item carries at most (a larger set is split: the
#: cluster merges partial acknowledgements of one batch).
sync_request_batch_indexes_per_item_max = 20_000
#: A process georep up supervises that ran this long counts as healthy: its next
#: crash restarts at once.
up_stable_run_s = 60.0
#: Seconds georep up (and the drill) give a process between SIGTERM and SIGKILL.
up_stop_grace_s = 20.0
#: Seconds the drill waits for replication to stop after it cuts a link.
drill_cut_link_wait_s_max = 30.0
#: Deadline of one REST request of the drill or the export.
drill_rest_timeout_s = 10.0
#: Operation timeout of the drill's pulsar-client (seconds).
drill_client_operation_timeout_s = 15

# --- failover drill (georep/drill) ---------------------------------------------------
#: Drill: how long, at the failure, to wait for A's gateway to have read the
#: subscription's last state (its exposure counts what it has read; a poll interval).
drill_source_read_wait_s_max = 2.0
#: Drill, at the failure: A's cursor is read until two reads this many seconds apart
#: agree (more than the client's 100 ms grouping of acknowledgements), for at most the
#: second figure; past it the last read is kept, with a warning.
drill_cursor_quiet_s = 0.3
drill_cursor_quiet_wait_s_max = 5.0
#: Drill, at the failure with ``kill``: how long A's gateway may go on sending to B what
#: it holds once A's cluster is dead, before its exposure is read (it is read once its
#: replicators to B have nothing left in flight), and how often it is asked.
drill_quiet_wait_s_max = 2.0
#: Drill, after the failure: how long to wait for B's gateway to have applied every
#: state B stores (``GET /sync/caught-up``) before the consumers move to B, as an
#: operator's failover does; a warning past it, and the consumers move anyway.
drill_caught_up_wait_s_max = 30.0
drill_poll_interval_s = 0.05
#: Messages one drill produces, and keys it spreads them over, at most.
drill_messages_count_max = 1_000_000
drill_keys_count_max = 100_000
#: Seconds the drill waits between stopping the consumers on A (and producing the last
#: message) and failing A, by default: more than a snapshot interval and a sync poll, so
#: that what A acknowledged has had time to reach B (``--settle 0`` shows what a failure
#: without that grace costs).
drill_settle_s_default = 3.0
drill_settle_s_max = 600.0
#: Seconds the drill waits, before producing, for both gateways to replicate and sync
#: its new topic (discovery passes); past it the drill goes on and says so.
drill_ready_s_max = 60.0
#: ``[gateway] discovery_interval_s`` of the gateways a drill stands up itself: its topic
#: is new, and one pass on each side comes before the drill can start.
drill_discovery_interval_s = 0.5
#: Messages a second produced on A, and handled by the consumers on A together, by
#: default; and the most either flag accepts. A paced drill lets production, snapshots,
#: acknowledgements, nack redeliveries and syncs interleave as in a running system.
drill_produce_rate_per_s_default = 500.0
drill_consume_rate_per_s_default = 500.0
drill_rate_per_s_max = 1_000_000.0
#: Seconds the consumers on A may take to reach the failure point.
drill_consume_timeout_s_max = 300.0
#: The drain on B ends once nothing arrived for ``quiet`` seconds after the expected
#: messages did, or for ``quiet_incomplete`` seconds without them; and after the timeout.
drill_drain_quiet_s_default = 3.0
drill_drain_quiet_incomplete_s = 10.0
drill_drain_timeout_s_max = 300.0
#: Seconds the reader on B may wait for one message the broker said is available.
drill_read_timeout_s_max = 30.0
#: Ids listed per category in the report (the counts are always complete).
drill_sample_ids_max = 20
#: Deliveries drawn in the HTML chart; above it every n-th one is (duplicates always).
drill_chart_points_max = 20_000
#: Managed topology starts tried (fresh ports each) before the drill gives up.
drill_start_attempts_max = 3
#: The sync lag sampled from B's gateway and A's replication backlog to B while A runs,
#: for the page's timelines: one sample every this many seconds, at most this many (then
#: every other one is dropped and the interval doubled, so a long run keeps its whole span).
drill_sync_sample_interval_s = 0.25
drill_sync_samples_count_max = 400
#: A failback (``--failback``) moves the consumers home once B's state has reached A and
#: A's cursor has not moved for ``quiet`` seconds; after ``sync_max`` seconds it moves
#: them all the same, with a warning (pulsar-compatible and real Pulsar may never send
#: B's state: their mark-delete position moves to completed snapshots only).
drill_failback_quiet_s = 2.0
drill_failback_sync_s_max = 30.0

invariant(drill_failback_quiet_s < drill_failback_sync_s_max)
invariant(drill_settle_s_default > snapshot_interval_s_default + sync_poll_interval_s_default)
invariant(drill_settle_s_default <= drill_settle_s_max)
invariant(drill_drain_quiet_s_default < drill_drain_quiet_incomplete_s < drill_drain_timeout_s_max)
# --- end of failover drill ---------------------------------------------------------

# --- schema registry (broker/schema_registry.py, broker/meta/schemas.py) ------------
#: Bytes of one schema's definition (an Avro record's JSON, say). Pulsar sets no limit of
#: its own below its frame; a PRODUCER command carrying it must fit a frame with room.
schema_data_bytes_max = 256 * KIB
#: Properties one schema carries, and the characters of each key and value.
schema_properties_count_max = 64
schema_property_chars_max = 1024
#: Versions one topic's schema may reach (deletions count: each is a version, as in
#: Pulsar); past it a new schema is refused, an existing one still matches.
schema_versions_per_topic_max = 1000

invariant(schema_data_bytes_max + pulsar_send_command_bytes_max < pulsar_frame_bytes_max)
# --- end of schema registry ----------------------------------------------------------
