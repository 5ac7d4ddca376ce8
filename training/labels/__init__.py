"""Router labels (`logicroute label`): each route's score and cost per question, and the preference vectors."""
