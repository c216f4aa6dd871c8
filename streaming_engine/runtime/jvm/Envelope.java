package io.streamingengine.spark;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.functions;

/**
 * Split a multi-table batch (streaming_engine/runtime/rows.py) into one
 * DataFrame per table in ONE py4j call: built from Python, each frame took
 * about 20 round trips (a column, an alias, a list element each), 100 tables
 * about two seconds.
 */
public final class Envelope {
  private Envelope() {}

  /** Field separator inside a record of {@code spec}. */
  public static final String FIELD = "\u0002";
  /** Record separator of {@code spec}. */
  public static final String RECORD = "\u0001";

  /**
   * {@code spec}: records separated by {@link #RECORD}, fields by {@link #FIELD}.
   * The first record is the table column, then the metadata columns to keep;
   * every other record is a table id, then pairs of (slot column, column name).
   * Returns, per table record, {@code df.where(table column = id).select(meta..., slot AS name...)}.
   */
  public static Object[] split(Dataset<Row> df, String spec) {
    String[] records = spec.split(RECORD, -1);
    String[] meta = records[0].split(FIELD, -1);
    Column table = col(meta[0]);
    Object[] out = new Object[records.length - 1];
    for (int i = 1; i < records.length; i++) {
      String[] f = records[i].split(FIELD, -1);
      int pairs = (f.length - 1) / 2;
      Column[] cols = new Column[meta.length - 1 + pairs];
      int k = 0;
      for (int m = 1; m < meta.length; m++) {
        cols[k++] = col(meta[m]);
      }
      for (int p = 0; p < pairs; p++) {
        cols[k++] = col(f[1 + 2 * p]).alias(f[2 + 2 * p]);
      }
      out[i - 1] = df.where(table.equalTo(functions.lit(f[0]))).select(cols);
    }
    return out;
  }

  /**
   * The inverse of {@link #split}: per-table frames ({@code frames}, in the
   * order of the table records) in ONE multi-table envelope. {@code spec}'s
   * first record is the metadata columns (the table column first), its second
   * the slots as pairs of (slot column, Spark DDL type); every other record is a
   * table id, then pairs of (column name, slot). Each frame becomes {@code
   * select(id AS table column, meta..., column AS slot or a typed null...)},
   * brought to one partition ({@code coalesce(1)}: a table's rows in one
   * partition, as the shuffle by table leaves them); the frames are unioned.
   */
  public static Dataset<Row> join(Dataset<Row>[] frames, String spec) {
    String[] records = spec.split(RECORD, -1);
    String[] meta = records[0].split(FIELD, -1);
    String[] slots = records[1].split(FIELD, -1);
    int n = slots.length / 2;
    Dataset<Row> out = null;
    for (int i = 0; i < frames.length; i++) {
      String[] f = records[2 + i].split(FIELD, -1);
      java.util.Map<String, String> bySlot = new java.util.HashMap<>();
      for (int p = 1; p + 1 < f.length; p += 2) {
        bySlot.put(f[p + 1], f[p]);
      }
      Column[] cols = new Column[meta.length + n];
      cols[0] = functions.lit(f[0]).alias(meta[0]);
      for (int m = 1; m < meta.length; m++) {
        cols[m] = col(meta[m]);
      }
      for (int s = 0; s < n; s++) {
        String slot = slots[2 * s];
        String name = bySlot.get(slot);
        cols[meta.length + s] = (name != null ? col(name) : functions.lit(null).cast(slots[2 * s + 1])).alias(slot);
      }
      Dataset<Row> framed = frames[i].select(cols).coalesce(1);
      out = out == null ? framed : out.union(framed);
    }
    return out;
  }

  private static Column col(String name) {
    return functions.col("`" + name.replace("`", "``") + "`");
  }
}
