import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Properties;

/**
 * What java.util.Properties.load(Reader) makes of each text on stdin, for comparison with the
 * service's reader. In: a count, then each text as a length and its UTF-8 bytes. Out, per text:
 * 0 and the entries, or 1 and the refusal's message; strings as a length and UTF-16 code units,
 * so that lone surrogates from \\uXXXX escapes arrive as they are.
 */
public final class PropertiesOracle {
    public static void main(String[] args) throws IOException {
        DataInputStream in = new DataInputStream(new BufferedInputStream(System.in));
        DataOutputStream out = new DataOutputStream(new BufferedOutputStream(System.out));
        int count = in.readInt();
        for (int i = 0; i < count; i++) {
            byte[] text = new byte[in.readInt()];
            in.readFully(text);
            Properties properties = new Properties();
            try {
                properties.load(new StringReader(new String(text, StandardCharsets.UTF_8)));
            } catch (IllegalArgumentException refused) {
                out.writeByte(1);
                writeString(out, String.valueOf(refused.getMessage()));
                continue;
            }
            out.writeByte(0);
            out.writeInt(properties.size());
            for (Map.Entry<Object, Object> entry : properties.entrySet()) {
                writeString(out, (String) entry.getKey());
                writeString(out, (String) entry.getValue());
            }
        }
        out.flush();
    }

    private static void writeString(DataOutputStream out, String value) throws IOException {
        out.writeInt(value.length());
        out.writeChars(value);
    }
}
