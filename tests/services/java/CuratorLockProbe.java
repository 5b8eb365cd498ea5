// A Hudi writer's table lock, for interoperability tests: Apache Curator's InterProcessMutex, the lock behind
// Hudi's ZookeeperBasedLockProvider.
//
//   CuratorLockProbe hold <connect> <path> <hold-seconds>
//       waits for the lock (up to 60 s), prints "ACQUIRED <epoch ms>", holds it until <hold-seconds> passed
//       or a line (or end of input) arrives on stdin, releases it and prints "RELEASED <epoch ms>".
//   CuratorLockProbe try <connect> <path> <timeout-seconds>
//       prints "ACQUIRED <epoch ms>" then "RELEASED <epoch ms>" if it got the lock within the timeout,
//       else "TIMEOUT <epoch ms>".
//
// Exit code 0 unless something failed (2: bad arguments, 1: ZooKeeper trouble).

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorLockProbe {
    private static void say(String word) {
        System.out.println(word + " " + System.currentTimeMillis());
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 4 || !(args[0].equals("hold") || args[0].equals("try"))) {
            System.err.println("usage: CuratorLockProbe hold|try <connect> <path> <seconds>");
            System.exit(2);
        }
        String mode = args[0];
        double seconds = Double.parseDouble(args[3]);
        CuratorFramework client = CuratorFrameworkFactory.newClient(
            args[1], 10000, 15000, new ExponentialBackoffRetry(100, 3));
        client.start();
        try {
            if (!client.blockUntilConnected(15, TimeUnit.SECONDS)) {
                System.err.println("no connection to ZooKeeper at " + args[1]);
                System.exit(1);
            }
            InterProcessMutex mutex = new InterProcessMutex(client, args[2]);
            long waitMs = mode.equals("hold") ? 60000L : (long) (seconds * 1000);
            if (!mutex.acquire(waitMs, TimeUnit.MILLISECONDS)) {
                say("TIMEOUT");
                return;
            }
            say("ACQUIRED");
            if (mode.equals("hold")) {
                CountDownLatch done = new CountDownLatch(1);
                Thread stdin = new Thread(() -> {
                    try {
                        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
                    } catch (Exception ignored) {
                        // end of input or a broken pipe: release all the same
                    }
                    done.countDown();
                });
                stdin.setDaemon(true);
                stdin.start();
                done.await((long) (seconds * 1000), TimeUnit.MILLISECONDS);
            }
            mutex.release();
            say("RELEASED");
        } finally {
            client.close();
        }
    }
}
