package io.streamingengine.spark;

import java.io.IOException;
import java.io.Serializable;
import java.net.URI;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.hadoop.fs.Path;
import org.apache.spark.api.java.function.Function2;
import org.apache.spark.paths.SparkPath;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.ProjectingInternalRow;
import org.apache.spark.sql.catalyst.ProjectingInternalRow$;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.InterpretedUnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.types.PhysicalDataType$;
import org.apache.spark.sql.delta.DeltaOperations;
import org.apache.spark.sql.delta.OptimisticTransaction;
import org.apache.spark.sql.delta.actions.Action;
import org.apache.spark.sql.delta.actions.AddFile;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.unsafe.types.UTF8String;

import scala.Function1;
import scala.Option;
import scala.Tuple2;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Applies one epoch's changes (upserts and deletes by key) to many Delta
 * tables in ONE Spark job: what one {@code MERGE} per table does (copy on
 * write), for every table of a multi-table batch at once.
 *
 * <p>The input is the engine's row envelope, each table's rows in one
 * partition (the runtime's shuffle by table). A task takes, per table, the
 * last change per key (by the sequence column, then the source order
 * {@code __seq}; update-before rows are ignored); with tombstones, it reads
 * the tombstone table's files that may hold those keys or expired tombstones,
 * merges the epoch's deletes into them and drops the changes no newer than
 * their key's tombstone; then it finds the table's files that may hold the
 * keys by their statistics (min/max of the key columns), reads them, and
 * rewrites those that do hold one (rows of other keys copied; a matched row
 * deleted or replaced when the change is newer; other changes inserted),
 * with Delta's Parquet format and Delta's own per-file statistics, under final
 * names in the table's directory. Nothing is committed here: the caller
 * commits each table (remove + add + txn) with {@link #commit}, as a MERGE.
 *
 * <p>Returns one line per result: {@code A TAB txn TAB name TAB size TAB mtime
 * TAB stats} (a file written), {@code R TAB txn TAB path} (a file to remove),
 * {@code M TAB txn TAB source TAB inserted TAB updated TAB deleted TAB copied TAB deleted by a truncate},
 * {@code T TAB txn TAB the source position of the epoch's newest truncate}.
 */
public final class MultiTableMerge {
    private MultiTableMerge() {}

    static final String UPDATE_BEFORE = "-U";
    static final String DELETE = "-D";
    static final String TRUNCATE = "!T";

    // -----------------------------------------------------------------
    // the driver's list of each table's live files

    /** The row-reading clone of each session that merged (vectorized Parquet reader off). */
    private static final Map<SparkSession, SparkSession> READING = new ConcurrentHashMap<>();

    private static final Map<String, Files> FILES = new ConcurrentHashMap<>();

    static final class Files {
        long version;
        final LinkedHashMap<String, AddFile> byPath = new LinkedHashMap<>();
    }

    /**
     * The table's live files at the transaction's read version: this driver's
     * list, brought up to that version from the log's commits (no Spark job);
     * the first time, or when the commits are gone, from the table's state.
     */
    public static AddFile[] liveFiles(OptimisticTransaction txn) {
        long version = txn.readVersion();
        if (version < 0) {
            return new AddFile[0];
        }
        String key = txn.deltaLog().dataPath().toString();
        synchronized (lock(key)) {
            return liveFiles(txn, key, version);
        }
    }

    private static final Map<String, Object> LOCKS = new ConcurrentHashMap<>();

    private static Object lock(String key) {
        return LOCKS.computeIfAbsent(key, k -> new Object());
    }

    @SuppressWarnings("unchecked")
    private static AddFile[] liveFiles(OptimisticTransaction txn, String key, long version) {
        Files f = FILES.get(key);
        if (f != null && f.version > version) {
            f = null;
        }
        if (f != null && f.version < version) {
            try {
                scala.collection.Iterator<Tuple2<Object, Seq<Action>>> it =
                    txn.deltaLog().getChanges(f.version + 1, version, Option.empty(), true);
                long next = f.version + 1;
                while (it.hasNext()) {
                    Tuple2<Object, Seq<Action>> c = it.next();
                    if ((Long) c._1() != next) {
                        throw new IllegalStateException("commit " + next + " missing");
                    }
                    apply(f, c._2());
                    f.version = next++;
                }
            } catch (RuntimeException e) {
                f = null;
            }
            if (f != null && f.version != version) {
                f = null;
            }
        }
        if (f == null) {
            f = new Files();
            f.version = version;
            for (AddFile a : txn.snapshot().allFiles().collectAsList()) {
                f.byPath.put(a.path(), a);
            }
            FILES.put(key, f);
        }
        return f.byPath.values().toArray(new AddFile[0]);
    }

    private static void apply(Files f, Seq<Action> actions) {
        scala.collection.Iterator<Action> it = actions.iterator();
        while (it.hasNext()) {
            Action a = it.next();
            if (a instanceof AddFile) {
                f.byPath.put(((AddFile) a).path(), (AddFile) a);
            } else if (a instanceof org.apache.spark.sql.delta.actions.RemoveFile) {
                f.byPath.remove(((org.apache.spark.sql.delta.actions.RemoveFile) a).path());
            }
        }
    }

    /** Drop the file lists (a run ended: the next one reads the tables again). */
    public static void forget() {
        READING.clear();
        FILES.clear();
        LOCKS.clear();  // (one per table ever written: a driver running job after job would keep them all)
    }

    /** Whether any of the files carries a deletion vector (not read here: such tables MERGE through Delta). */
    public static boolean hasDeletionVectors(AddFile[] files) {
        for (AddFile a : files) {
            if (a.deletionVector() != null) {
                return true;
            }
        }
        return false;
    }

    // -----------------------------------------------------------------
    // the job

    /**
     * {@code specJson}: {@code {"kind": ordinal, "order": ordinal, "now": epoch ms, "tables": [{"id": table id,
     * "txn": index of its transaction, "ordinals": [...], "key": [positions in the table], "seq": position or -1,
     * "tomb": index of the tombstone table's transaction or -1, "tombWrite": bool, "retention": ms}]}}.
     * {@code files[i]}: the live files of {@code txns[i]} ({@link #liveFiles}).
     */
    @SuppressWarnings({"unchecked", "rawtypes"})
    public static String[] merge(Dataset<Row> batch, String specJson, OptimisticTransaction[] txns, AddFile[][] files)
            throws IOException {
        SparkSession spark = batch.sparkSession();
        JsonNode spec = new ObjectMapper().readTree(specJson);
        MultiTableWrite.Writers writers = MultiTableWrite.Writers.of(spark, txns, batch);
        // Parquet's row reader (rows read one at a time, a file read twice: the
        // keys to find the touched files, then the rewrite), on a session clone
        // (one clone per session, kept until forget(), not a new session state every epoch)
        SparkSession reading = READING.computeIfAbsent(spark, s -> {
            SparkSession clone = ((org.apache.spark.sql.classic.SparkSession) s).cloneSession();
            clone.conf().set("spark.sql.parquet.enableVectorizedReader", "false");
            return clone;
        });
        scala.collection.immutable.Map<String, String> options =
            (scala.collection.immutable.Map<String, String>) (Object) scala.collection.immutable.Map$.MODULE$.empty()
                .updated("returning_batch", "false");
        List<Function1<PartitionedFile, scala.collection.Iterator<InternalRow>>> readers = new ArrayList<>();
        for (StructType schema : writers.groupSchemas) {
            readers.add(new ParquetFileFormat().buildReaderWithPartitionValues(
                reading, schema, new StructType(), schema, (Seq) scala.collection.immutable.Nil$.MODULE$,
                options, reading.sessionState().newHadoopConf()));  // (one each: the reader sets its schema there)
        }
        JsonNode tables = spec.get("tables");
        TableSpec[] specs = new TableSpec[tables.size()];
        for (int k = 0; k < specs.length; k++) {
            specs[k] = new TableSpec(tables.get(k), writers.schemas);
        }
        Task task = new Task(specs, spec.get("kind").asInt(), spec.get("order").asInt(), spec.get("now").asLong(),
            writers, readers.toArray(new Function1[0]), files);
        List<String> lines = batch.queryExecution().toRdd().toJavaRDD()
            .mapPartitionsWithIndex(task, false).collect();
        return lines.toArray(new String[0]);
    }

    /** What the job knows of one table (serialized with the task). */
    static final class TableSpec implements Serializable {
        final String id;
        final int txn;
        final int[] ordinals;
        final int[] key;
        final DataType[] keyTypes;
        final String[] keyNames;
        final int seq;
        final DataType seqType;
        final int tomb;
        final boolean tombWrite;
        final long retentionMs;
        final boolean sourceOrder;  // a truncate clears the rows older than its source position (else every row)
        final long mark;  // the newest truncate an earlier epoch recorded (source order; -1: none)
        final boolean partial;  // kinds may be PARTIAL ("+U~3,5"): those columns keep the table's values
        final DataType[] types;  // the target's column types
        final String[] names;  // the target's column names
        final String location;  // the table's location (for messages)

        TableSpec(JsonNode t, StructType[] schemas) {
            id = t.get("id").asText();
            txn = t.get("txn").asInt();
            ordinals = ints(t.get("ordinals"));
            key = ints(t.get("key"));
            StructType schema = schemas[txn];
            if (schema.fields().length != ordinals.length) {
                throw new IllegalArgumentException(
                    "table " + id + " has " + schema.fields().length + " columns, the batch " + ordinals.length);
            }
            keyTypes = new DataType[key.length];
            keyNames = new String[key.length];
            for (int j = 0; j < key.length; j++) {
                keyTypes[j] = schema.fields()[key[j]].dataType();
                keyNames[j] = schema.fields()[key[j]].name();
            }
            seq = t.get("seq").asInt();
            seqType = seq < 0 ? null : schema.fields()[seq].dataType();
            tomb = t.get("tomb").asInt();
            tombWrite = t.get("tombWrite").asBoolean();
            retentionMs = t.get("retention").asLong();
            sourceOrder = t.path("sourceOrder").asBoolean(false);
            mark = t.path("mark").asLong(-1);
            partial = t.path("partial").asBoolean(false);
            location = t.path("location").asText(id);
            types = new DataType[schema.fields().length];
            names = new String[schema.fields().length];
            for (int j = 0; j < types.length; j++) {
                types[j] = schema.fields()[j].dataType();
                names[j] = schema.fields()[j].name();
            }
        }

        private static int[] ints(JsonNode a) {
            int[] out = new int[a.size()];
            for (int k = 0; k < out.length; k++) {
                out[k] = a.get(k).asInt();
            }
            return out;
        }
    }

    /** One change: the envelope row (a copy) and its key. */
    static final class Change {
        final InternalRow row;
        boolean matched;

        Change(InternalRow row) {
            this.row = row;
        }
    }

    static final class Task implements Function2<Integer, Iterator<InternalRow>, Iterator<String>>, Serializable {
        private final TableSpec[] specs;
        private final int kindOrdinal;
        private final int orderOrdinal;
        private final long nowMs;
        private final MultiTableWrite.Writers writers;
        private final StructType[] schemas;
        private final int[] groupOf;
        private final Function1<PartitionedFile, scala.collection.Iterator<InternalRow>>[] readers;
        private final AddFile[][] files;

        // per task
        private transient MultiTableWrite.Writers.InTask newFiles;
        private transient ObjectMapper json;

        Task(TableSpec[] specs, int kindOrdinal, int orderOrdinal, long nowMs, MultiTableWrite.Writers writers,
             Function1<PartitionedFile, scala.collection.Iterator<InternalRow>>[] readers, AddFile[][] files) {
            this.specs = specs;
            this.kindOrdinal = kindOrdinal;
            this.orderOrdinal = orderOrdinal;
            this.nowMs = nowMs;
            this.writers = writers;
            this.schemas = writers.schemas;
            this.groupOf = writers.groupOf;
            this.readers = readers;
            this.files = files;
        }

        @Override
        public Iterator<String> call(Integer partition, Iterator<InternalRow> rows) throws Exception {
            newFiles = writers.inTask(partition);
            json = new ObjectMapper();
            Map<UTF8String, Integer> index = new HashMap<>();
            for (int k = 0; k < specs.length; k++) {
                index.put(UTF8String.fromString(specs[k].id), k);
            }
            // the epoch's last change per key, per table of this partition
            Map<Integer, Map<UnsafeRow, Change>> changes = new LinkedHashMap<>();
            Map<Integer, UnsafeProjection> keyOfChange = new HashMap<>();
            Map<Integer, Long> truncatedAt = new HashMap<>();  // the newest TRUNCATE's __seq per table
            while (rows.hasNext()) {
                InternalRow row = rows.next();
                Integer k = row.isNullAt(0) ? null : index.get(row.getUTF8String(0));
                if (k == null || row.isNullAt(kindOrdinal)  // (MERGE's filter on the kind drops a null)
                        || UPDATE_BEFORE.equals(row.getUTF8String(kindOrdinal).toString())) {
                    continue;
                }
                TableSpec t = specs[k];
                if (TRUNCATE.equals(row.getUTF8String(kindOrdinal).toString())) {
                    truncatedAt.merge(k, order(row), Math::max);
                    changes.computeIfAbsent(k, x -> new HashMap<>());
                    continue;
                }
                UnsafeProjection project = keyOfChange.computeIfAbsent(k, x -> keyProjection(t, true));
                UnsafeRow key = project.apply(row).copy();
                Map<UnsafeRow, Change> table = changes.computeIfAbsent(k, x -> new HashMap<>());
                Change had = table.get(key);
                if (had == null || later(t, row, had.row)) {
                    table.put(key, new Change(row.copy()));
                }
            }
            List<String> lines = new ArrayList<>();
            List<Written> written = new ArrayList<>();
            try {
                for (Map.Entry<Integer, Map<UnsafeRow, Change>> e : changes.entrySet()) {
                    TableSpec t = specs[e.getKey()];
                    Map<UnsafeRow, Change> latest = e.getValue();
                    long source = latest.size();
                    long at = truncatedAt.getOrDefault(e.getKey(), -1L);
                    long older = Math.max(at, t.mark);  // changes at or before the newest truncate are gone
                    if (older >= 0) {
                        latest.values().removeIf(c -> order(c.row) <= older);
                    }
                    if (at >= 0) {
                        lines.add("T\t" + t.txn + "\t" + at);
                    }
                    Map<UnsafeRow, Change> applied = latest;
                    if (t.tomb >= 0) {
                        applied = tombstones(t, latest, lines, written);
                    }
                    apply(t, source, applied, at, lines, written);
                }
            } catch (Exception ex) {
                for (Written w : written) {
                    w.file.abort();
                }
                throw ex;
            }
            for (Written w : written) {
                String s = newFiles.stats(w.file);
                lines.add("A\t" + w.txn + "\t" + w.file.name + "\t" + w.file.size + "\t" + w.file.mtime + "\t" + s);
            }
            return lines.iterator();
        }

        /** The key of an envelope row ({@code change}) or of a row of the table. */
        private UnsafeProjection keyProjection(TableSpec t, boolean change) {
            List<Expression> refs = new ArrayList<>();
            for (int j = 0; j < t.key.length; j++) {
                int at = change ? t.ordinals[t.key[j]] : t.key[j];
                refs.add(new BoundReference(at, t.keyTypes[j], true));
            }
            return InterpretedUnsafeProjection.createProjection(CollectionConverters.asScala(refs).toList());
        }

        /** The key of a row of the tombstone table (the key columns first). */
        private UnsafeProjection tombKeyProjection(TableSpec t) {
            List<Expression> refs = new ArrayList<>();
            for (int j = 0; j < t.key.length; j++) {
                refs.add(new BoundReference(j, t.keyTypes[j], true));
            }
            return InterpretedUnsafeProjection.createProjection(CollectionConverters.asScala(refs).toList());
        }

        private long order(InternalRow row) {
            return row.isNullAt(orderOrdinal) ? Long.MIN_VALUE : row.getLong(orderOrdinal);
        }

        /** A row of the table a truncate at source position {@code at} deletes when no change matches it. */
        private boolean cleared(TableSpec t, InternalRow row, long at) {
            return at >= 0 && (!t.sourceOrder || row.isNullAt(t.seq) || row.getLong(t.seq) < at);
        }

        /** Whether envelope row {@code a} is a later change than {@code b}: by the sequence (nulls first), then __seq. */
        private boolean later(TableSpec t, InternalRow a, InternalRow b) {
            if (t.seq >= 0) {
                int c = compareNullsFirst(t.seqType, value(a, t.ordinals[t.seq], t.seqType),
                    value(b, t.ordinals[t.seq], t.seqType));
                if (c != 0) {
                    return c > 0;
                }
            }
            long x = a.isNullAt(orderOrdinal) ? Long.MIN_VALUE : a.getLong(orderOrdinal);
            long y = b.isNullAt(orderOrdinal) ? Long.MIN_VALUE : b.getLong(orderOrdinal);
            return x > y;
        }

        private static Object value(InternalRow row, int ordinal, DataType type) {
            return row.isNullAt(ordinal) ? null : row.get(ordinal, type);
        }

        private static int compareNullsFirst(DataType type, Object a, Object b) {
            if (a == null || b == null) {
                return a == null ? (b == null ? 0 : -1) : 1;
            }
            return PhysicalDataType$.MODULE$.ordering(type).compare(a, b);
        }

        /** SQL's {@code s > t} of two sequence values: null when either is null, here false. */
        private static boolean greater(DataType type, Object s, Object t) {
            return s != null && t != null && PhysicalDataType$.MODULE$.ordering(type).compare(s, t) > 0;
        }

        private boolean isDelete(InternalRow change) {
            return DELETE.equals(change.getUTF8String(kindOrdinal).toString());
        }

        /**
         * Merges the epoch's last changes into the tombstone table (a delete
         * newer than the key's tombstone replaces it, an insert or update newer
         * than it removes it, a delete of a key without one adds one,
         * tombstones past retention no change touches go) and returns the
         * changes without the inserts and updates no newer than their key's
         * tombstone as it was before this epoch.
         */
        private Map<UnsafeRow, Change> tombstones(TableSpec t, Map<UnsafeRow, Change> latest, List<String> out,
                                                  List<Written> written) throws Exception {
            int d = t.tomb;
            StructType schema = schemas[d];
            int seqAt = t.key.length;  // keys, sequence, __deleted_at
            int deletedAt = seqAt + 1;
            long cutoffMicros = (nowMs - t.retentionMs) * 1000L;
            UnsafeProjection keyOf = tombKeyProjection(t);
            Map<UnsafeRow, Object> dead = new HashMap<>();  // key -> its tombstone's sequence, before this epoch
            List<InternalRow> kept = new ArrayList<>();
            Set<UnsafeRow> met = new HashSet<>();
            boolean changed = false;
            long added = 0, updated = 0, removed = 0, copied = 0;
            for (AddFile f : files[d]) {
                if (!mayHold(f, t.keyNames, t.keyTypes, latest.keySet(), t.keyTypes.length)
                        && !mayHoldBefore(f, schema.fields()[deletedAt].name(), cutoffMicros)) {
                    continue;
                }
                List<InternalRow> fileRows = new ArrayList<>();
                boolean fileChanged = false;
                scala.collection.Iterator<InternalRow> it = read(d, f);
                while (it.hasNext()) {
                    InternalRow row = it.next().copy();
                    UnsafeRow key = keyOf.apply(row).copy();
                    Object seq = value(row, seqAt, t.seqType);
                    Change s = latest.get(key);
                    if (s == null) {
                        if (!row.isNullAt(deletedAt) && row.getLong(deletedAt) < cutoffMicros) {
                            fileChanged = true;  // expired
                            removed++;
                            continue;
                        }
                        fileRows.add(row);
                        continue;
                    }
                    dead.put(key, seq);
                    met.add(key);
                    Object sseq = value(s.row, t.ordinals[t.seq], t.seqType);
                    if (greater(t.seqType, sseq, seq)) {
                        fileChanged = true;
                        if (isDelete(s.row)) {
                            fileRows.add(tombstone(t, s.row));
                            updated++;
                        } else {
                            removed++;
                        }
                    } else {
                        fileRows.add(row);
                    }
                }
                if (fileChanged) {
                    changed = true;
                    out.add("R\t" + d + "\t" + f.path());
                    kept.addAll(fileRows);
                    copied += fileRows.size();
                }
            }
            for (Map.Entry<UnsafeRow, Change> e : latest.entrySet()) {
                if (!met.contains(e.getKey()) && isDelete(e.getValue().row)) {
                    kept.add(tombstone(t, e.getValue().row));
                    added++;
                    changed = true;
                }
            }
            if (changed && t.tombWrite) {
                Written w = open(d);
                written.add(w);
                for (InternalRow row : kept) {
                    w.file.write(row);
                }
                w.file.closeStats();
                w.file.close();
                out.add("M\t" + d + "\t" + latest.size() + "\t" + added + "\t" + updated + "\t" + removed + "\t"
                    + (copied - updated) + "\t0");
            } else if (!t.tombWrite) {
                out.removeIf(line -> line.startsWith("R\t" + d + "\t"));
            }
            Map<UnsafeRow, Change> applied = new HashMap<>();
            for (Map.Entry<UnsafeRow, Change> e : latest.entrySet()) {
                InternalRow s = e.getValue().row;
                Object was = dead.get(e.getKey());
                if (!isDelete(s) && was != null) {
                    Object sseq = value(s, t.ordinals[t.seq], t.seqType);
                    if (sseq != null && PhysicalDataType$.MODULE$.ordering(t.seqType).compare(sseq, was) <= 0) {
                        continue;  // older than the key's delete
                    }
                }
                applied.put(e.getKey(), e.getValue());
            }
            return applied;
        }

        /** The positions a PARTIAL kind ("+U~3,5") leaves unchanged; null for any other kind. */
        private int[] unchanged(InternalRow change) {
            String kind = change.getUTF8String(kindOrdinal).toString();
            int at = kind.indexOf('~');
            if (at < 0) {
                return null;
            }
            String[] parts = kind.substring(at + 1).split(",");
            int[] out = new int[parts.length];
            for (int j = 0; j < parts.length; j++) {
                out[j] = Integer.parseInt(parts[j]);
            }
            return out;
        }

        /** The change's row with the columns at ``kept`` as the table's row has them. */
        private static InternalRow updatedKeeping(TableSpec t, InternalRow change, InternalRow target, int[] kept) {
            Object[] values = new Object[t.ordinals.length];
            for (int j = 0; j < values.length; j++) {
                values[j] = value(change, t.ordinals[j], t.types[j]);
            }
            for (int j : kept) {
                values[j] = value(target, j, t.types[j]);
            }
            return new GenericInternalRow(values);
        }

        /** As delta_txn._partial_values says it: an insert that leaves a column unchanged has no value for it. */
        private static String noRowToKeep(TableSpec t, InternalRow change, int[] kept) {
            StringBuilder key = new StringBuilder("{");
            for (int j = 0; j < t.key.length; j++) {
                Object v = value(change, t.ordinals[t.key[j]], t.keyTypes[j]);
                key.append(j == 0 ? "" : ",").append('"').append(t.keyNames[j]).append("\":").append(
                    v instanceof UTF8String ? "\"" + v + "\"" : String.valueOf(v));
            }
            return t.location + ": an upsert leaves column " + t.names[kept[0]] + " unchanged (a TOASTed value "
                + "PostgreSQL did not send under REPLICA IDENTITY DEFAULT) and the table has no row of its key to keep "
                + "the value from (an UPDATE that changed the primary key, or a row missing from the table); set "
                + "REPLICA IDENTITY FULL on the source table and read it again into a new table (a new checkpoint) "
                + "- key " + key.append('}');
        }

        /** A tombstone row: the change's key, its sequence, now. */
        private InternalRow tombstone(TableSpec t, InternalRow change) {
            Object[] values = new Object[t.key.length + 2];
            for (int j = 0; j < t.key.length; j++) {
                values[j] = value(change, t.ordinals[t.key[j]], t.keyTypes[j]);
            }
            values[t.key.length] = value(change, t.ordinals[t.seq], t.seqType);
            values[t.key.length + 1] = nowMs * 1000L;
            return new GenericInternalRow(values);
        }

        /** Applies the changes to the table: rewrites the files holding their keys, inserts the others. */
        private void apply(TableSpec t, long source, Map<UnsafeRow, Change> changes, long truncatedAt,
                           List<String> out, List<Written> written) throws Exception {
            int m = t.txn;
            UnsafeProjection keyOf = keyProjection(t, false);
            ProjectingInternalRow view = view(t);
            Written w = null;
            long inserted = 0, updated = 0, deleted = 0, copied = 0, cleared = 0;
            boolean clear = truncatedAt >= 0;  // every file may hold a row the truncate deletes
            for (AddFile f : files[m]) {
                if (!clear && (changes.isEmpty() || !mayHold(f, t.keyNames, t.keyTypes, changes.keySet(), t.key.length))) {
                    continue;
                }
                boolean touched = false;
                scala.collection.Iterator<InternalRow> it = read(m, f);
                while (it.hasNext() && !touched) {
                    InternalRow row = it.next();
                    touched = changes.containsKey(keyOf.apply(row)) || cleared(t, row, truncatedAt);
                }
                while (it.hasNext()) {  // Spark's row-based Parquet reader closes its file only at the end (no
                    it.next();          // task-completion listener): a file left half read stayed open for good
                }
                if (!touched) {
                    continue;
                }
                out.add("R\t" + m + "\t" + f.path());
                if (w == null) {
                    w = open(m);
                    written.add(w);
                }
                it = read(m, f);
                while (it.hasNext()) {
                    InternalRow row = it.next();
                    Change s = changes.get(keyOf.apply(row));
                    if (s == null && cleared(t, row, truncatedAt)) {
                        cleared++;
                        continue;
                    }
                    if (s == null) {
                        w.file.write(row);
                        copied++;
                        continue;
                    }
                    s.matched = true;
                    boolean newer = t.seq < 0 || row.isNullAt(t.seq)
                        || greater(t.seqType, value(s.row, t.ordinals[t.seq], t.seqType), row.get(t.seq, t.seqType));
                    if (!newer) {
                        w.file.write(row);
                        copied++;
                    } else if (isDelete(s.row)) {
                        deleted++;
                    } else {
                        int[] kept = t.partial ? unchanged(s.row) : null;
                        if (kept != null) {
                            w.file.write(updatedKeeping(t, s.row, row, kept));
                        } else {
                            view.project(s.row);
                            w.file.write(view);
                        }
                        updated++;
                    }
                }
            }
            for (Change s : changes.values()) {
                if (!s.matched && !isDelete(s.row)) {
                    int[] kept = t.partial ? unchanged(s.row) : null;
                    if (kept != null) {
                        throw new IllegalStateException(noRowToKeep(t, s.row, kept));
                    }
                    if (w == null) {
                        w = open(m);
                        written.add(w);
                    }
                    view.project(s.row);
                    w.file.write(view);
                    inserted++;
                }
            }
            if (w != null) {
                w.file.closeStats();
                w.file.close();
            }
            out.add("M\t" + m + "\t" + source + "\t" + inserted + "\t" + updated + "\t" + deleted + "\t" + copied
                + "\t" + cleared);
        }

        private ProjectingInternalRow view(TableSpec t) {
            List<Object> cols = new ArrayList<>();
            for (int k : t.ordinals) {
                cols.add(k);
            }
            return ProjectingInternalRow$.MODULE$.apply(schemas[t.txn], CollectionConverters.asScala(cols).toList());
        }

        private scala.collection.Iterator<InternalRow> read(int txn, AddFile f) throws Exception {
            Path path = new Path(new URI(f.path()));
            if (!path.isAbsolute()) {
                path = new Path(new Path(writers.roots[txn]), path);
            }
            PartitionedFile file = PartitionedFile.apply(
                InternalRow.empty(), SparkPath.fromPath(path), 0L, f.size(), new String[0], f.modificationTime(),
                f.size(), PartitionedFile.apply$default$8());
            return readers[groupOf[txn]].apply(file);
        }

        /**
         * Whether the file may hold one of the keys, by its statistics (min/max
         * of integral and string key columns; any other type, a null key value
         * or missing statistics: it may).
         */
        private boolean mayHold(AddFile f, String[] names, DataType[] types, Set<UnsafeRow> keys, int width) {
            if (f.stats() == null || f.stats().isEmpty()) {
                return true;
            }
            JsonNode stats;
            try {
                stats = json.readTree(f.stats());
            } catch (IOException e) {
                return true;
            }
            JsonNode min = stats.get("minValues");
            JsonNode max = stats.get("maxValues");
            if (min == null || max == null) {
                return true;
            }
            if (stats.has("numRecords") && stats.get("numRecords").asLong() == 0) {
                return false;
            }
            for (UnsafeRow key : keys) {
                boolean inside = true;
                for (int j = 0; j < width && inside; j++) {
                    inside = within(key, j, types[j], min.get(names[j]), max.get(names[j]));
                }
                if (inside) {
                    return true;
                }
            }
            return false;
        }

        private static boolean within(UnsafeRow key, int j, DataType type, JsonNode low, JsonNode high) {
            if (key.isNullAt(j) || low == null || high == null || low.isNull() || high.isNull()) {
                return true;
            }
            if (type instanceof LongType || type instanceof IntegerType || type instanceof ShortType
                    || type instanceof ByteType) {
                if (!low.isIntegralNumber() || !high.isIntegralNumber()) {
                    return true;
                }
                long v = type instanceof LongType ? key.getLong(j) : type instanceof IntegerType ? key.getInt(j)
                    : type instanceof ShortType ? key.getShort(j) : key.getByte(j);
                return low.asLong() <= v && v <= high.asLong();
            }
            if (type instanceof StringType) {
                if (!low.isTextual() || !high.isTextual()) {
                    return true;
                }
                // Delta's string statistics: a prefix of the minimum (<= it) and a
                // prefix of the maximum with a tie-breaker appended (>= it)
                UTF8String v = key.getUTF8String(j);
                return UTF8String.fromString(low.asText()).compareTo(v) <= 0
                    && v.compareTo(UTF8String.fromString(high.asText())) <= 0;
            }
            return true;
        }

        /** Whether the file may hold a row whose timestamp column is before {@code micros}. */
        private boolean mayHoldBefore(AddFile f, String column, long micros) {
            try {
                JsonNode low = json.readTree(f.stats()).get("minValues").get(column);
                long at = java.time.OffsetDateTime.parse(low.asText()).toInstant().toEpochMilli() * 1000L;
                return at < micros;
            } catch (Exception e) {
                return true;  // no statistics: it may
            }
        }

        private Written open(int txn) throws IOException {
            return new Written(txn, newFiles.open(txn));
        }
    }

    static final class Written {
        final int txn;
        final MultiTableWrite.OpenFile file;

        Written(int txn, MultiTableWrite.OpenFile file) {
            this.txn = txn;
            this.file = file;
        }
    }

    /** Key column types whose equality is their bytes (floating point keys, -0.0 and NaN, MERGE through Delta). */
    public static boolean keyTypeSupported(DataType type) {
        return type instanceof LongType || type instanceof IntegerType || type instanceof ShortType
            || type instanceof ByteType || type instanceof StringType || type instanceof DateType
            || type instanceof TimestampType || type instanceof TimestampNTZType || type instanceof BooleanType
            || type instanceof BinaryType || (type instanceof DecimalType
                && ((DecimalType) type).precision() <= org.apache.spark.sql.types.Decimal.MAX_LONG_DIGITS());
    }

    // -----------------------------------------------------------------
    // the commit

    /**
     * Commits one table's result of {@link #merge}: the removes of the files it
     * rewrote (from this driver's file list), the adds, and the other actions
     * ({@code actionJsons}, one per line: the txn action; a new table's
     * metadata is the transaction's), as a MERGE with its operationMetrics. The
     * transaction read the whole table: a concurrent change of it fails the
     * commit (Delta's conflict check), nothing is retried here.
     */
    public static long commit(SparkSession spark, OptimisticTransaction txn, String actionJsons, String removedPaths,
                              String metricsJson, String matchedDelete, String matchedUpdate, String insert)
            throws IOException {
        String[] removed = removedPaths.isEmpty() ? new String[0] : removedPaths.split("\n");
        synchronized (lock(txn.deltaLog().dataPath().toString())) {
            return commitLocked(spark, txn, actionJsons, removed, metricsJson, matchedDelete, matchedUpdate, insert);
        }
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static long commitLocked(SparkSession spark, OptimisticTransaction txn, String actionJsons,
                                     String[] removed, String metricsJson, String matchedDelete,
                                     String matchedUpdate, String insert) throws IOException {
        Files f = FILES.get(txn.deltaLog().dataPath().toString());
        long now = System.currentTimeMillis();
        List<Action> actions = new ArrayList<>();
        List<AddFile> read = new ArrayList<>();
        long removedBytes = 0;
        if (f != null && f.version == txn.readVersion()) {
            read.addAll(f.byPath.values());
        }
        for (String path : removed) {
            AddFile a = f == null || f.version != txn.readVersion() ? null : f.byPath.get(path);
            if (a == null) {
                throw new IllegalStateException("file " + path + " is not in the table's version "
                    + txn.readVersion() + " known to this driver");
            }
            actions.add(a.removeWithTimestamp(now, true));
            removedBytes += a.size();
        }
        if (!actionJsons.isEmpty()) {
            for (String line : actionJsons.split("\n")) {
                actions.add(Action$.MODULE$.fromJson(line));
            }
        }
        txn.readWholeTable();
        txn.trackFilesRead(CollectionConverters.asScala(read).toList());
        Map<String, Long> metrics = new HashMap<>();
        Iterator<Map.Entry<String, JsonNode>> it = new ObjectMapper().readTree(metricsJson).fields();
        while (it.hasNext()) {
            Map.Entry<String, JsonNode> e = it.next();
            metrics.put(e.getKey(), e.getValue().asLong());
        }
        metrics.put("numTargetFilesRemoved", (long) removed.length);
        metrics.put("numTargetBytesRemoved", removedBytes);
        MultiTableWrite.registerMetrics(spark, txn, metrics);
        List<DeltaOperations.MergePredicate> matched = new ArrayList<>();
        matched.add(new DeltaOperations.MergePredicate(Option.apply(matchedDelete), "delete"));
        matched.add(new DeltaOperations.MergePredicate(Option.apply(matchedUpdate), "update"));
        List<DeltaOperations.MergePredicate> notMatched = new ArrayList<>();
        notMatched.add(new DeltaOperations.MergePredicate(Option.apply(insert), "insert"));
        DeltaOperations.Merge op = new DeltaOperations.Merge(
            Option.empty(), Option.empty(), Option.empty(), Option.empty(),
            CollectionConverters.asScala(matched).toList(), CollectionConverters.asScala(notMatched).toList(),
            (Seq) scala.collection.immutable.Nil$.MODULE$);
        long readVersion = txn.readVersion();
        long version = txn.commit(CollectionConverters.asScala(actions).toList(), op);
        if (f != null && f.version == readVersion && version == readVersion + 1) {
            apply(f, CollectionConverters.asScala(actions).toList());
            f.version = version;
        } else if (readVersion < 0 && version == 0) {  // a table this commit created: its list is the adds
            Files created = new Files();
            apply(created, CollectionConverters.asScala(actions).toList());
            FILES.put(txn.deltaLog().dataPath().toString(), created);
        }
        return version;
    }

    private static final class Action$ {
        static final org.apache.spark.sql.delta.actions.Action$ MODULE$ =
            org.apache.spark.sql.delta.actions.Action$.MODULE$;
    }
}
