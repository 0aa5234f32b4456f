import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;

import javax.management.MBeanServerConnection;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

import com.sun.tools.attach.VirtualMachine;

/**
 * Reads what the broker shim's threads have cost a running Kafka node so far: for every thread
 * named {@code throttle-service-shim-*} (the poller, the ticker, the volume reporter), its CPU
 * time and the bytes it allocated, from the JVM's own ThreadMXBean. Attaches to the node's JVM
 * by pid (same user), so the node needs no JMX flags. Prints one JSON object on stdout.
 *
 * <p>Run: {@code java bench/ShimThreadProbe.java <node pid>}
 */
public final class ShimThreadProbe {
    public static void main(String[] args) throws Exception {
        VirtualMachine vm = VirtualMachine.attach(args[0]);
        String address = vm.startLocalManagementAgent();
        vm.detach();
        try (JMXConnector connector = JMXConnectorFactory.connect(new JMXServiceURL(address))) {
            MBeanServerConnection server = connector.getMBeanServerConnection();
            com.sun.management.ThreadMXBean threads = ManagementFactory.newPlatformMXBeanProxy(server, ManagementFactory.THREAD_MXBEAN_NAME,
                    com.sun.management.ThreadMXBean.class);
            StringBuilder json = new StringBuilder("{");
            for (ThreadInfo info : threads.getThreadInfo(threads.getAllThreadIds())) {
                if (info == null || !info.getThreadName().startsWith("throttle-service-shim-")) {
                    continue;
                }
                long id = info.getThreadId();
                json.append(json.length() > 1 ? ", " : "").append('"').append(info.getThreadName()).append("\": {\"cpu_ns\": ")
                        .append(threads.getThreadCpuTime(id)).append(", \"allocated_bytes\": ").append(threads.getThreadAllocatedBytes(id))
                        .append('}');
            }
            System.out.println(json.append('}'));
        }
    }
}
