import Host
