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
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.types.DataTypeUtils;
import org.apache.spark.sql.delta.OptimisticTransaction;
import org.apache.spark.sql.delta.stats.DeltaJobStatisticsTracker;
import org.apache.spark.sql.execution.datasources.OutputWriter;
import org.apache.spark.sql.execution.datasources.OutputWriterFactory;
import org.apache.spark.sql.execution.datasources.WriteTaskStatsTracker;
import org.apache.spark.sql.execution.datasources.parquet.ParquetWriteSupport;
import org.apache.spark.sql.types.StructField;
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
 * table's columns sit in slots at known ordinals ({@code ordinalLists[i]}:
 * comma-separated, in the table's column order); rows of other tables are
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

    @SuppressWarnings({"unchecked", "rawtypes"})
    public static String[] write(
            Dataset<Row> batch, String[] ids, String[] roots, String[] ordinalLists, OptimisticTransaction[] txns)
            throws IOException {
        SparkSession spark = batch.sparkSession();
        int n = ids.length;
        int[][] ordinals = new int[n][];
        for (int i = 0; i < n; i++) {
            String[] parts = ordinalLists[i].isEmpty() ? new String[0] : ordinalLists[i].split(",");
            ordinals[i] = new int[parts.length];
            for (int k = 0; k < parts.length; k++) {
                ordinals[i][k] = Integer.parseInt(parts[k]);
            }
        }
        StructType[] schemas = new StructType[n];
        Object[] dataCols = new Object[n];
        Expression[] statsExprs = new Expression[n];
        Map<String, Integer> alike = new HashMap<>();
        for (int i = 0; i < n; i++) {
            StructType schema = txns[i].metadata().schema();
            if (schema.fields().length != ordinals[i].length) {
                throw new IllegalArgumentException(
                    "table " + ids[i] + " has " + schema.fields().length + " columns, the batch "
                        + ordinals[i].length);
            }
            schemas[i] = schema;
            // tables alike (schema, settings, protocol) get the same statistics expression: built once
            String key = txns[i].metadata().schemaString() + "\u0001" + txns[i].metadata().configuration()
                + "\u0001" + txns[i].protocol().json();
            Integer same = alike.get(key);
            if (same != null) {
                dataCols[i] = dataCols[same];
                statsExprs[i] = statsExprs[same];
                continue;
            }
            alike.put(key, i);
            Seq output = DataTypeUtils.toAttributes(schema);
            scala.Tuple2 trackers = txns[i].getOptionalStatsTrackerAndStatsCollection(
                output, new Path(roots[i]), new StructType(), batch);
            scala.Option tracker = (scala.Option) trackers._1();
            if (tracker.isDefined()) {
                DeltaJobStatisticsTracker t = (DeltaJobStatisticsTracker) tracker.get();
                dataCols[i] = t.dataCols();
                statsExprs[i] = t.statsColExpr();
            }
        }
        // the Parquet settings of Delta's writer (session and table options), the
        // schema set per table on the executors
        Configuration conf = spark.sessionState().newHadoopConf();
        Job job = Job.getInstance(conf);
        OutputWriterFactory factory = txns[0].deltaLog()
            .fileFormat(txns[0].protocol(), txns[0].metadata())
            .prepareWrite(spark, job, scala.collection.immutable.Map$.MODULE$.empty(), schemas[0]);
        Task task = new Task(ids, roots, ordinals, schemas, dataCols, statsExprs, factory,
            new SerializableConfiguration(job.getConfiguration()));
        List<String> lines = batch.queryExecution().toRdd().toJavaRDD()
            .mapPartitionsWithIndex(task, false).collect();
        return lines.toArray(new String[0]);
    }

    /**
     * Commit one table's files written by {@link #write}: the add actions and
     * the txn action in ONE commit, as {@code WRITE (Append)}, with the
     * operationMetrics Delta's writer records. Returns the new version.
     */
    public static long commit(SparkSession spark, OptimisticTransaction txn, String[] actionJsons,
                              long files, long rows, long bytes, Object operation) {
        scala.collection.mutable.HashMap<String, org.apache.spark.sql.execution.metric.SQLMetric> metrics =
            new scala.collection.mutable.HashMap<>();
        long[] values = {files, rows, bytes};
        String[] names = {"numFiles", "numOutputRows", "numOutputBytes"};
        for (int k = 0; k < names.length; k++) {
            org.apache.spark.sql.execution.metric.SQLMetric m =
                org.apache.spark.sql.execution.metric.SQLMetrics.createMetric(spark.sparkContext(), names[k]);
            m.add(values[k]);
            metrics.put(names[k], m);
        }
        txn.registerSQLMetrics(spark, metrics.toMap(scala.$less$colon$less$.MODULE$.refl()));
        List<org.apache.spark.sql.delta.actions.Action> actions = new ArrayList<>();
        for (String json : actionJsons) {
            actions.add(org.apache.spark.sql.delta.actions.Action$.MODULE$.fromJson(json));
        }
        return txn.commit(CollectionConverters.asScala(actions).toList(),
            (org.apache.spark.sql.delta.DeltaOperations.Operation) operation);
    }

    /** What each task runs: route rows by table id, one open file at a time (rows arrive grouped by table). */
    static final class Task implements Function2<Integer, Iterator<InternalRow>, Iterator<String>>, Serializable {
        private final String[] ids;
        private final String[] roots;
        private final int[][] ordinals;
        private final StructType[] schemas;
        private final Object[] dataCols;
        private final Expression[] statsExprs;
        private final OutputWriterFactory factory;
        private final SerializableConfiguration conf;

        Task(String[] ids, String[] roots, int[][] ordinals, StructType[] schemas, Object[] dataCols,
             Expression[] statsExprs, OutputWriterFactory factory, SerializableConfiguration conf) {
            this.ids = ids;
            this.roots = roots;
            this.ordinals = ordinals;
            this.schemas = schemas;
            this.dataCols = dataCols;
            this.statsExprs = statsExprs;
            this.factory = factory;
            this.conf = conf;
        }

        @Override
        public Iterator<String> call(Integer partition, Iterator<InternalRow> rows) throws Exception {
            Map<UTF8String, Integer> index = new HashMap<>();
            for (int i = 0; i < ids.length; i++) {
                index.put(UTF8String.fromString(ids[i]), i);
            }
            UnsafeProjection[] projections = new UnsafeProjection[ids.length];
            List<String> out = new ArrayList<>();
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
                            out.add(open.close());
                        }
                        open = open(partition, table);
                    }
                    if (projections[table] == null) {
                        projections[table] = projection(table);
                    }
                    open.write(projections[table].apply(row));
                }
                if (open != null) {
                    out.add(open.close());
                    open = null;
                }
            } finally {
                if (open != null) {
                    open.abort();
                }
            }
            return out.iterator();
        }

        private UnsafeProjection projection(int table) {
            List<Expression> exprs = new ArrayList<>();
            StructField[] fields = schemas[table].fields();
            for (int k = 0; k < fields.length; k++) {
                exprs.add(new BoundReference(ordinals[table][k], fields[k].dataType(), true));
            }
            return UnsafeProjection.create(CollectionConverters.asScala(exprs).toList());
        }

        @SuppressWarnings({"unchecked", "rawtypes"})
        private OpenFile open(int partition, int table) throws IOException {
            TaskContext tc = TaskContext.get();
            Configuration c = new Configuration(conf.value());
            ParquetWriteSupport.setSchema(schemas[table], c);
            TaskAttemptID attempt = new TaskAttemptID(
                "streamingengine", tc == null ? 0 : tc.stageId(), TaskType.MAP, partition,
                tc == null ? 0 : tc.attemptNumber());
            TaskAttemptContext ctx = new TaskAttemptContextImpl(c, attempt);
            String name = String.format("part-%05d-%s-c000%s", partition, UUID.randomUUID(),
                factory.getFileExtension(ctx));
            Path root = new Path(roots[table]);
            Path path = new Path(root, name);
            WriteTaskStatsTracker stats = null;
            if (statsExprs[table] != null) {
                stats = new DeltaJobStatisticsTracker(c, root, (Seq<Attribute>) dataCols[table], statsExprs[table])
                    .newTaskInstance();
                stats.newFile(path.toString());
            }
            OutputWriter writer = factory.newInstance(path.toString(), schemas[table], ctx);
            return new OpenFile(table, path, name, writer, stats, path.getFileSystem(c));
        }
    }

    static final class OpenFile {
        final int table;
        final Path path;
        final String name;
        final OutputWriter writer;
        final WriteTaskStatsTracker stats;
        final FileSystem fs;

        OpenFile(int table, Path path, String name, OutputWriter writer, WriteTaskStatsTracker stats, FileSystem fs) {
            this.table = table;
            this.path = path;
            this.name = name;
            this.writer = writer;
            this.stats = stats;
            this.fs = fs;
        }

        void write(InternalRow row) {
            writer.write(row);
            if (stats != null) {
                stats.newRow(path.toString(), row);
            }
        }

        String close() throws IOException {
            writer.close();
            String json = "";
            if (stats != null) {
                org.apache.spark.sql.delta.stats.DeltaFileStatistics found =
                    (org.apache.spark.sql.delta.stats.DeltaFileStatistics) stats.getFinalStats(System.currentTimeMillis());
                scala.Option<String> s = found.stats().get(name);
                json = s.isDefined() ? s.get() : "";
            }
            FileStatus st = fs.getFileStatus(path);
            return table + "\t" + name + "\t" + st.getLen() + "\t" + st.getModificationTime() + "\t" + json;
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
