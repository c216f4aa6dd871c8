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

  private static Column col(String name) {
    return functions.col("`" + name.replace("`", "``") + "`");
  }
}
