import java.lang.management.ManagementFactory;
import java.util.Set;
import java.util.TreeSet;

import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

import com.sun.tools.attach.VirtualMachine;

/**
 * Reads a running broker's own produce quota sensors over JMX: for every sensor
 * (kafka.server:type=Produce,...), the byte-rate Kafka measures and compares with the quota,
 * and its throttle-time. Attaches to the broker JVM by pid (same user), so the broker needs no
 * JMX flags. Prints one JSON line per poll on stdout until killed.
 *
 * <p>Run: {@code java bench/QuotaSensorProbe.java <broker pid> [interval ms]}
 */
public final class QuotaSensorProbe {
    public static void main(String[] args) throws Exception {
        String pid = args[0];
        long intervalMs = args.length > 1 ? Long.parseLong(args[1]) : 250;
        VirtualMachine vm = VirtualMachine.attach(pid);
        String address = vm.startLocalManagementAgent();
        vm.detach();
        try (JMXConnector connector = JMXConnectorFactory.connect(new JMXServiceURL(address))) {
            MBeanServerConnection server = connector.getMBeanServerConnection();
            ObjectName pattern = new ObjectName("kafka.server:type=Produce,*");
            long pidSelf = ManagementFactory.getRuntimeMXBean().getPid();
            while (true) {
                StringBuilder line = new StringBuilder("{\"wall_ms\": ").append(System.currentTimeMillis()).append(", \"probe\": ")
                        .append(pidSelf).append(", \"sensors\": [");
                Set<ObjectName> names = new TreeSet<>(server.queryNames(pattern, null));
                boolean first = true;
                for (ObjectName name : names) {
                    Object rate;
                    Object throttle;
                    try {
                        rate = server.getAttribute(name, "byte-rate");
                        throttle = server.getAttribute(name, "throttle-time");
                    } catch (Exception e) {
                        continue; // not a quota sensor (e.g. the delay queue), or expired meanwhile
                    }
                    line.append(first ? "" : ", ").append("{\"name\": \"").append(name.getKeyPropertyListString().replace("\"", "\\\""))
                            .append("\", \"epoch\": \"").append(name.getKeyProperty("throttle-epoch")).append("\", \"byte_rate\": ")
                            .append(number(rate)).append(", \"throttle_time\": ").append(number(throttle)).append("}");
                    first = false;
                }
                System.out.println(line.append("]}"));
                System.out.flush();
                Thread.sleep(intervalMs);
            }
        }
    }

    private static String number(Object value) {
        double d = value instanceof Number n ? n.doubleValue() : Double.NaN;
        return Double.isFinite(d) ? Double.toString(d) : "null";
    }
}
