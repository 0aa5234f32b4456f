import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;

/** Unregisters a broker with the Java Admin API (KIP-631): {@code UnregisterBroker <bootstrap> <broker id>}. */
public class UnregisterBroker {
    public static void main(String[] args) throws Exception {
        Properties properties = new Properties();
        properties.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        try (Admin admin = Admin.create(properties)) {
            admin.unregisterBroker(Integer.parseInt(args[1])).all().get();
        }
        System.out.println("unregistered broker " + args[1]);
    }
}
