package io.streamingengine.spark;

import net.minidev.json.JSONStyle;
import net.minidev.json.JSONValue;
import net.minidev.json.parser.JSONParser;
import net.minidev.json.parser.ParseException;
import org.apache.spark.sql.api.java.UDF1;

/**
 * A JSON document as SeaTunnel's JsonPath transform reads it: Jayway JsonPath's default provider parses
 * with json-smart in its permissive mode (unquoted keys and string values, single quotes, ...). Returns
 * the same document as strict JSON text, or null when even the permissive parser refuses it. A Spark
 * SQL function (registered by transforms/_jsonpath_catalyst.py): it runs in the executors' JVM, no Python.
 */
public final class PermissiveJson implements UDF1<String, String> {
    private static final long serialVersionUID = 1L;

    @Override
    public String call(String text) {
        if (text == null) {
            return null;
        }
        try {
            // Jayway's JsonSmartJsonProvider: permissive mode, objects keep their keys' order
            Object value = new JSONParser(JSONParser.MODE_PERMISSIVE).parse(text, JSONValue.defaultReader.DEFAULT_ORDERED);
            return JSONValue.toJSONString(value, JSONStyle.NO_COMPRESS);
        } catch (ParseException | RuntimeException e) {
            return null;
        }
    }
}
