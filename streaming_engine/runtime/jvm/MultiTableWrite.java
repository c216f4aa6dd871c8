package io.streamingengine.spark;

import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.UUID;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.TaskType;
import org.apache.hadoop.mapreduce.task.TaskAttemptContextImpl;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.Function2;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.ProjectingInternalRow;
import org.apache.spark.sql.catalyst.ProjectingInternalRow$;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.types.DataTypeUtils;
import org.apache.spark.sql.delta.OptimisticTransaction;
import org.apache.spark.sql.delta.stats.DeltaJobStatisticsTracker;
import org.apache.spark.sql.execution.datasources.OutputWriter;
import org.apache.spark.sql.execution.datasources.OutputWriterFactory;
import org.apache.spark.sql.execution.datasources.WriteTaskStatsTracker;
import org.apache.spark.sql.execution.datasources.parquet.ParquetWriteSupport;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import org.apache.spark.util.SerializableConfiguration;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Writes the data files of many Delta tables in ONE Spark job (the fan-out of
 * a multi-table batch), with what Delta's own writer
 * ({@code TransactionalWrite.writeFiles}) puts in them: the table's Parquet
 * format and settings ({@code DeltaLog.fileFormat(...).prepareWrite}) and the
 * per-file statistics of Delta's own statistics tracker, built by each
 * table's transaction ({@code getOptionalStatsTrackerAndStatsCollection}).
 *
 * <p>The input is the engine's row envelope: column 0 is the table id, the
 * table's columns sit in slots at known ordinals ({@code tablesJson}:
 * {@code [[table id, [ordinal, ...]], ...]} in the order of {@code txns}, the
 * ordinals in the table's column order); rows of other tables are
 * skipped. Each task writes, for each
 * table whose rows it holds, files under their final names in the table's
 * directory, through Hadoop's FileSystem (any scheme; no staging, no rename).
 * Nothing is committed here: the caller commits each table's files in its own
 * transaction. Files of a failed or retried task are never committed, so
 * readers never see them and VACUUM removes them, as with Delta's writer.
 *
 * <p>Returns one line per file: {@code table index TAB file name TAB size TAB
 * modification time TAB statistics JSON (empty when statistics are off)}.
 */
public final class MultiTableWrite {
    private MultiTableWrite() {}

    private static final java.util.concurrent.atomic.AtomicLong CLOSED_IN_BACKGROUND =
        new java.util.concurrent.atomic.AtomicLong();

    /** How many files this JVM's tasks closed on a closer thread (see {@link Closer}). */
    public static long filesClosedInBackground() {
        return CLOSED_IN_BACKGROUND.get();
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    public static String[] write(Dataset<Row> batch, String tablesJson, OptimisticTransaction[] txns)
            throws IOException {
        SparkSession spark = batch.sparkSession();
        // [[table id, [ordinal, ...]], ...] in the order of txns
        com.fasterxml.jackson.databind.JsonNode tables =
            new com.fasterxml.jackson.databind.ObjectMapper().readTree(tablesJson);
        int n = txns.length;
        String[] ids = new String[n];
        int[][] ordinals = new int[n][];
        for (int i = 0; i < n; i++) {
            com.fasterxml.jackson.databind.JsonNode t = tables.get(i);
            ids[i] = t.get(0).asText();
            ordinals[i] = new int[t.get(1).size()];
            for (int k = 0; k < ordinals[i].length; k++) {
                ordinals[i][k] = t.get(1).get(k).asInt();
            }
        }
        for (int i = 0; i < n; i++) {
            int columns = txns[i].metadata().schema().fields().length;
            if (columns != ordinals[i].length) {
                throw new IllegalArgumentException(
                    "table " + ids[i] + " has " + columns + " columns, the batch " + ordinals[i].length);
            }
        }
        Task task = new Task(ids, ordinals, Writers.of(spark, txns, batch));
        List<String> lines = batch.queryExecution().toRdd().toJavaRDD()
            .mapPartitionsWithIndex(task, false).collect();
        return lines.toArray(new String[0]);
    }

    /**
     * Commit one table's files written by {@link #write}: the add actions and
     * the txn action in ONE commit, as {@code WRITE (Append)}, with the
     * operationMetrics Delta's writer records. {@code actionJsons}: one action
     * per line. Returns the new version.
     */
    public static long commit(SparkSession spark, OptimisticTransaction txn, String actionJsons,
                              long files, long rows, long bytes, Object operation) {
        Map<String, Long> metrics = new HashMap<>();
        metrics.put("numFiles", files);
        metrics.put("numOutputRows", rows);
        metrics.put("numOutputBytes", bytes);
        registerMetrics(spark, txn, metrics);
        List<org.apache.spark.sql.delta.actions.Action> actions = new ArrayList<>();
        for (String json : actionJsons.split("\n")) {
            actions.add(org.apache.spark.sql.delta.actions.Action$.MODULE$.fromJson(json));
        }
        return txn.commit(CollectionConverters.asScala(actions).toList(),
            (org.apache.spark.sql.delta.DeltaOperations.Operation) operation);
    }

    /** Registers the commit's operationMetrics (Delta keeps those its operation names). */
    static void registerMetrics(SparkSession spark, OptimisticTransaction txn, Map<String, Long> values) {
        scala.collection.mutable.HashMap<String, org.apache.spark.sql.execution.metric.SQLMetric> metrics =
            new scala.collection.mutable.HashMap<>();
        for (Map.Entry<String, Long> e : values.entrySet()) {
            org.apache.spark.sql.execution.metric.SQLMetric m =
                org.apache.spark.sql.execution.metric.SQLMetrics.createMetric(spark.sparkContext(), e.getKey());
            m.set(e.getValue());
            metrics.put(e.getKey(), m);
        }
        txn.registerSQLMetrics(spark, metrics.toMap(scala.$less$colon$less$.MODULE$.refl()));
    }

    /** What each task runs: route rows by table id, one open file at a time (rows arrive grouped by table). */
    static final class Task implements Function2<Integer, Iterator<InternalRow>, Iterator<String>>, Serializable {
        private final String[] ids;
        private final int[][] ordinals;
        private final Writers writers;

        Task(String[] ids, int[][] ordinals, Writers writers) {
            this.ids = ids;
            this.ordinals = ordinals;
            this.writers = writers;
        }

        @Override
        public Iterator<String> call(Integer partition, Iterator<InternalRow> rows) throws Exception {
            Map<UTF8String, Integer> index = new HashMap<>();
            for (int i = 0; i < ids.length; i++) {
                index.put(UTF8String.fromString(ids[i]), i);
            }
            // the table's columns read in place from the envelope's slots (no generated projection per table)
            ProjectingInternalRow[] views = new ProjectingInternalRow[ids.length];
            Writers.InTask files = writers.inTask(partition);
            List<OpenFile> closed = new ArrayList<>();
            // a finished file is closed (its Parquet footer written, its upload
            // done: on an object store a round trip or more) on a closer thread
            // while this one writes the next table's rows
            Closer closer = new Closer(writers.conf.value());
            OpenFile open = null;
            try {
                while (rows.hasNext()) {
                    InternalRow row = rows.next();
                    Integer table = row.isNullAt(0) ? null : index.get(row.getUTF8String(0));
                    if (table == null) {
                        continue;  // a table this write was not given (written another way, or held already)
                    }
                    if (open == null || open.table != table) {
                        if (open != null) {
                            OpenFile finished = open;
                            open = null;  // the closer's now (it aborts it itself if it cannot take it)
                            closer.close(finished);
                        }
                        open = files.open(table);
                    }
                    if (views[table] == null) {
                        views[table] = view(table);
                    }
                    views[table].project(row);
                    open.write(views[table]);
                }
                if (open != null) {
                    OpenFile last = open;
                    open = null;
                    closer.close(last);
                }
                closed.addAll(closer.finish());
            } finally {
                if (open != null) {
                    open.abort();
                }
                closer.abort();
            }
            List<String> out = new ArrayList<>();
            for (OpenFile f : closed) {
                out.add(f.table + "\t" + f.name + "\t" + f.size + "\t" + f.mtime + "\t" + files.stats(f));
            }
            return out.iterator();
        }

        private ProjectingInternalRow view(int table) {
            List<Object> cols = new ArrayList<>();
            for (int k : ordinals[table]) {
                cols.add(k);
            }
            return ProjectingInternalRow$.MODULE$.apply(
                writers.schemas[table], CollectionConverters.asScala(cols).toList());
        }
    }

    /**
     * What writing Delta files of many tables takes, as Delta's writer does it:
     * built on the driver from each table's transaction (tables alike in schema,
     * settings and protocol share one group: one statistics expression, and in
     * each task one Parquet configuration and statistics tracker, their
     * generated code built once, not per file), used in tasks ({@link InTask}).
     */
    static final class Writers implements Serializable {
        final String[] roots;
        final StructType[] schemas;
        final int[] groupOf;
        final StructType[] groupSchemas;
        private final Object[] dataCols;
        private final Expression[] statsExprs;
        private final OutputWriterFactory factory;
        final SerializableConfiguration conf;

        private Writers(String[] roots, StructType[] schemas, int[] groupOf, StructType[] groupSchemas,
                        Object[] dataCols, Expression[] statsExprs, OutputWriterFactory factory,
                        SerializableConfiguration conf) {
            this.roots = roots;
            this.schemas = schemas;
            this.groupOf = groupOf;
            this.groupSchemas = groupSchemas;
            this.dataCols = dataCols;
            this.statsExprs = statsExprs;
            this.factory = factory;
            this.conf = conf;
        }

        @SuppressWarnings({"unchecked", "rawtypes"})
        static Writers of(SparkSession spark, OptimisticTransaction[] txns, Dataset<Row> batch) throws IOException {
            int n = txns.length;
            String[] roots = new String[n];
            StructType[] schemas = new StructType[n];
            int[] groupOf = new int[n];
            List<Object> dataCols = new ArrayList<>();
            List<Expression> statsExprs = new ArrayList<>();
            List<StructType> groupSchemas = new ArrayList<>();
            Map<String, Integer> alike = new HashMap<>();
            for (int i = 0; i < n; i++) {
                roots[i] = txns[i].deltaLog().dataPath().toString();
                schemas[i] = txns[i].metadata().schema();
                String key = txns[i].metadata().schemaString() + "\u0001" + txns[i].metadata().configuration()
                    + "\u0001" + txns[i].protocol().json();
                Integer same = alike.get(key);
                if (same != null) {
                    groupOf[i] = same;
                    continue;
                }
                groupOf[i] = groupSchemas.size();
                alike.put(key, groupOf[i]);
                groupSchemas.add(schemas[i]);
                Seq output = DataTypeUtils.toAttributes(schemas[i]);
                scala.Tuple2 trackers = txns[i].getOptionalStatsTrackerAndStatsCollection(
                    output, new Path(roots[i]), new StructType(), batch);
                scala.Option tracker = (scala.Option) trackers._1();
                if (tracker.isDefined()) {
                    DeltaJobStatisticsTracker t = (DeltaJobStatisticsTracker) tracker.get();
                    dataCols.add(t.dataCols());
                    statsExprs.add(t.statsColExpr());
                } else {
                    dataCols.add(null);
                    statsExprs.add(null);
                }
            }
            // the Parquet settings of Delta's writer (session and table options), the
            // schema set per group on the executors
            Configuration conf = spark.sessionState().newHadoopConf();
            Job job = Job.getInstance(conf);
            OutputWriterFactory factory = txns[0].deltaLog()
                .fileFormat(txns[0].protocol(), txns[0].metadata())
                .prepareWrite(spark, job, scala.collection.immutable.Map$.MODULE$.empty(), schemas[0]);
            return new Writers(roots, schemas, groupOf, groupSchemas.toArray(new StructType[0]), dataCols.toArray(),
                statsExprs.toArray(new Expression[0]), factory, new SerializableConfiguration(job.getConfiguration()));
        }

        InTask inTask(int partition) {
            return new InTask(partition);
        }

        /** A task's writers: per group one configuration, task context and statistics tracker. */
        final class InTask {
            private final int partition;
            private final Configuration[] confs = new Configuration[groupSchemas.length];
            private final TaskAttemptContext[] contexts = new TaskAttemptContext[groupSchemas.length];
            private final WriteTaskStatsTracker[] trackers = new WriteTaskStatsTracker[groupSchemas.length];
            private List<Map<String, String>> stats;

            InTask(int partition) {
                this.partition = partition;
            }

            /** A new file of table {@code table} under a final name in its directory. */
            @SuppressWarnings("unchecked")
            OpenFile open(int table) throws IOException {
                int g = groupOf[table];
                if (confs[g] == null) {
                    confs[g] = new Configuration(conf.value());
                    ParquetWriteSupport.setSchema(groupSchemas[g], confs[g]);
                    if (statsExprs[g] != null) {
                        trackers[g] = new DeltaJobStatisticsTracker(
                            confs[g], new Path(roots[table]), (Seq<Attribute>) dataCols[g], statsExprs[g])
                            .newTaskInstance();
                    }
                    // one per group and task: each is a JobConf, a copy of the whole configuration
                    TaskContext tc = TaskContext.get();
                    TaskAttemptID attempt = new TaskAttemptID(
                        "streamingengine", tc == null ? 0 : tc.stageId(), TaskType.MAP, partition,
                        tc == null ? 0 : tc.attemptNumber());
                    contexts[g] = new TaskAttemptContextImpl(confs[g], attempt);
                }
                String name = String.format("part-%05d-%s-c000%s", partition, UUID.randomUUID(),
                    factory.getFileExtension(contexts[g]));
                Path path = new Path(new Path(roots[table]), name);
                String file = path.toString();
                WriteTaskStatsTracker tracker = trackers[g];
                if (tracker != null) {
                    tracker.newFile(file);
                }
                OutputWriter writer = factory.newInstance(file, schemas[table], contexts[g]);
                return new OpenFile(table, path, file, name, writer, tracker, path.getFileSystem(confs[g]));
            }

            /** The statistics JSON of a closed file ("" when statistics are off); once every file is closed. */
            String stats(OpenFile f) {
                if (stats == null) {
                    stats = new ArrayList<>();
                    for (WriteTaskStatsTracker tracker : trackers) {
                        Map<String, String> found = new HashMap<>();
                        if (tracker != null) {
                            scala.collection.immutable.Map<String, String> all =
                                ((org.apache.spark.sql.delta.stats.DeltaFileStatistics)
                                    tracker.getFinalStats(System.currentTimeMillis())).stats();
                            found.putAll(CollectionConverters.asJava(all));
                        }
                        stats.add(found);
                    }
                }
                return stats.get(groupOf[f.table]).getOrDefault(f.name, "");
            }
        }

    }

    /**
     * Closes a task's finished files on at most {@link #THREADS} threads of its
     * own, in the background, unless that could change how Parquet lays out the
     * files: a Parquet writer holds its share of Parquet's memory pool until
     * its close ends, and once the writers open in the executor would need more
     * than the pool, Parquet shrinks every writer's row groups
     * ({@code MemoryManager}). A file is closed in the background only while the
     * pool holds every registered writer, the closing ones and two more at
     * full row-group size; otherwise (or when the pool cannot be read) on the
     * task's thread, as Delta's writer does. A failed close fails the task;
     * the other files are aborted (removed; uncommitted either way).
     */
    static final class Closer {
        static final int THREADS = 2;
        private final long rowGroup;
        private final java.util.ArrayDeque<java.util.concurrent.Future<OpenFile>> pending = new java.util.ArrayDeque<>();
        private final List<OpenFile> inFlight = java.util.Collections.synchronizedList(new ArrayList<>());
        private final List<OpenFile> done = new ArrayList<>();
        private java.util.concurrent.ExecutorService pool;

        Closer(Configuration conf) {
            rowGroup = conf.getLong("parquet.block.size", 128L * 1024 * 1024);
        }

        /** Closes {@code f} (now or in the background); aborts it if it fails before a closer thread has it. */
        void close(OpenFile f) throws Exception {
            boolean taken = false;
            try {
                f.closeStats();
                while (pending.size() >= THREADS) {
                    done.add(next());
                }
                if (!roomInParquetPool()) {
                    drain();
                    done.add(f.close());
                    taken = true;
                    return;
                }
                if (pool == null) {
                    pool = java.util.concurrent.Executors.newFixedThreadPool(THREADS, r -> {
                        Thread t = new Thread(r, "multi-table-write-close");
                        t.setDaemon(true);
                        return t;
                    });
                }
                inFlight.add(f);  // from here on abort() removes it
                taken = true;
                submit(f);
            } finally {
                if (!taken) {
                    f.abort();
                }
            }
        }

        private void submit(OpenFile f) {
            pending.add(pool.submit(() -> {
                f.close();
                inFlight.remove(f);
                CLOSED_IN_BACKGROUND.incrementAndGet();
                return f;
            }));
        }

        private OpenFile next() throws Exception {
            try {
                return pending.removeFirst().get();
            } catch (java.util.concurrent.ExecutionException e) {
                throw e.getCause() instanceof Exception ? (Exception) e.getCause() : e;
            }
        }

        private void drain() throws Exception {
            while (!pending.isEmpty()) {
                done.add(next());
            }
        }

        List<OpenFile> finish() throws Exception {
            drain();
            return done;
        }

        /** Aborts what is still closing (after a failure); a no-op after {@link #finish}. */
        void abort() {
            if (pool != null) {
                pool.shutdownNow();
                try {
                    pool.awaitTermination(60, java.util.concurrent.TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            synchronized (inFlight) {
                for (OpenFile f : inFlight) {
                    f.abort();
                }
            }
        }

        private boolean roomInParquetPool() {
            try {
                Object manager = org.apache.parquet.hadoop.ParquetOutputFormat.getMemoryManager();
                java.lang.reflect.Method writers = manager.getClass().getDeclaredMethod("getWriterList");
                java.lang.reflect.Method total = manager.getClass().getDeclaredMethod("getTotalMemoryPool");
                writers.setAccessible(true);
                total.setAccessible(true);
                int registered = ((Map<?, ?>) writers.invoke(manager)).size();
                return (registered + 2) * rowGroup <= (Long) total.invoke(manager);
            } catch (ReflectiveOperationException | RuntimeException e) {
                return false;
            }
        }
    }

    static final class OpenFile {
        final int table;
        final Path path;
        final String file;
        final String name;
        final OutputWriter writer;
        final WriteTaskStatsTracker stats;
        final FileSystem fs;
        long size;
        long mtime;

        OpenFile(int table, Path path, String file, String name, OutputWriter writer, WriteTaskStatsTracker stats,
                 FileSystem fs) {
            this.table = table;
            this.path = path;
            this.file = file;
            this.name = name;
            this.writer = writer;
            this.stats = stats;
            this.fs = fs;
        }

        void write(InternalRow row) {
            writer.write(row);
            if (stats != null) {
                stats.newRow(file, row);
            }
        }

        /** Ends the file's statistics (kept by the tracker under the file's name): on the task's thread. */
        OpenFile closeStats() {
            if (stats != null) {
                stats.closeFile(file);
            }
            return this;
        }

        /** Closes the file (footer, upload); any thread, once its rows are written. */
        OpenFile close() throws IOException {
            writer.close();
            FileStatus st = fs.getFileStatus(path);
            size = st.getLen();
            mtime = st.getModificationTime();
            return this;
        }

        void abort() {
            try {
                writer.close();
            } catch (Exception ignored) {
                // the task fails anyway; an uncommitted file is invisible to readers
            }
            try {
                fs.delete(path, false);
            } catch (Exception ignored) {
                // left for VACUUM
            }
        }
    }
}
